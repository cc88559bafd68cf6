// Tiny DOM helpers: elements built from a tag, attributes and children; no framework.

/** Attributes of {@link h}: strings and numbers as attributes, booleans present or absent. */
export type Attributes = Readonly<Record<string, string | number | boolean | undefined>>;

/** A child of {@link h}: a node, text, or nothing. */
export type Child = Node | string | false | null | undefined;

/** An element with its attributes and children; `false`, null and undefined are skipped. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: readonly Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) {
      continue;
    }
    element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, ...children);
  return element;
}

/** Append children to a node, skipping empty ones. */
export function append(parent: Node, ...children: readonly Child[]): void {
  for (const child of children) {
    if (child === false || child === null || child === undefined) {
      continue;
    }
    parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

/** The element with `id`, which the page must have. */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const element = document.getElementById(id);
  if (!(element instanceof type)) {
    throw new Error(`the page has no ${type.name} #${id}`);
  }
  return element;
}

/** Replace every child of `parent`. */
export function replaceChildren(parent: Element, ...children: readonly Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}
