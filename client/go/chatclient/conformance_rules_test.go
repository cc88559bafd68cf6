package chatclient_test

// The conformance runner's own rules, without a server: the shared matching cases
// (tests/conformance/matching-cases.yaml), $name substitution and argument checks.

import (
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestMatchingCases(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(corpusDir(), "matching-cases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name     string         `yaml:"name"`
		Expected map[string]any `yaml:"expected"`
		Actual   map[string]any `yaml:"actual"`
		Matches  *bool          `yaml:"matches"`
	}
	if err := yaml.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("matching-cases.yaml has no cases")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if c.Matches == nil || c.Expected == nil || c.Actual == nil {
				t.Fatalf("a case has expected, actual and matches: %+v", c)
			}
			problems := match(c.Expected, c.Actual, "")
			if (len(problems) == 0) != *c.Matches {
				t.Errorf("expected %s, actual %s: matches %v, want %v (%v)",
					show(c.Expected), show(c.Actual), len(problems) == 0, *c.Matches, problems)
			}
		})
	}
}

func TestSubstituteReplacesOnlyWholeCaptureNames(t *testing.T) {
	r := &runner{values: map[string]string{"s": "session-1", "c_2": "3"}}
	got, err := r.substitute(map[string]any{
		"session": "$s",
		"list":    []any{"$c_2", "$5", "$", "$s.x", "price $s", "$s ", "s", 7},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"session": "session-1",
		"list":    []any{"3", "$5", "$", "$s.x", "price $s", "$s ", "s", 7},
	}
	if show(got) != show(want) {
		t.Errorf("substitute = %s, want %s", show(got), show(want))
	}
	if _, err := r.substitute([]any{"$unknown"}); err == nil {
		t.Error("a name never captured was substituted")
	}
}

func TestIntegerArgumentsTakeIntegersAndDecimalStrings(t *testing.T) {
	for _, value := range []any{3, int64(3), uint64(3), "3"} {
		if n, given, err := integerOf(value); n != 3 || !given || err != nil {
			t.Errorf("integerOf(%#v) = %d, %v, %v", value, n, given, err)
		}
	}
	if n, given, err := integerOf("-2"); n != -2 || !given || err != nil {
		t.Errorf("integerOf(\"-2\") = %d, %v, %v", n, given, err)
	}
	if _, given, err := integerOf(nil); given || err != nil {
		t.Errorf("integerOf(nil): given %v, err %v", given, err)
	}
	for _, value := range []any{3.0, 2.5, "2.5", "", "3 ", "+3", "x", "99999999999999999999", true, []any{}, map[string]any{}} {
		if _, _, err := integerOf(value); err == nil {
			t.Errorf("integerOf(%#v) was accepted", value)
		}
	}
}

func TestTextArgumentsTakeStrings(t *testing.T) {
	if s, err := textOf("m-1"); s != "m-1" || err != nil {
		t.Errorf("textOf = %q, %v", s, err)
	}
	if s, err := textOf(nil); s != "" || err != nil {
		t.Errorf("textOf(nil) = %q, %v", s, err)
	}
	for _, value := range []any{3, 2.5, true, []any{"a"}, map[string]any{}} {
		if _, err := textOf(value); err == nil {
			t.Errorf("textOf(%#v) was accepted", value)
		}
	}
}

func TestCheckArgumentsRefusesMistypedArgumentsAtAnyDepth(t *testing.T) {
	valid := map[string]any{
		"session": "s", "expected_cursor": "2", "turn_id": nil,
		"dispatch": map[string]any{"messages": []any{map[string]any{"id": "u1", "role": "user", "content": "hi"}}},
	}
	if err := checkArguments(valid); err != nil {
		t.Errorf("valid arguments refused: %v", err)
	}
	for _, args := range []map[string]any{
		{"expected_cursor": 1.5},
		{"page_size": "ten"},
		{"session": 12},
		{"submit": map[string]any{"content": 42}},
		{"dispatch": map[string]any{"messages": []any{map[string]any{"role": "user", "content": true}}}},
	} {
		if err := checkArguments(args); err == nil {
			t.Errorf("checkArguments(%s) accepted it", show(args))
		}
	}
}
