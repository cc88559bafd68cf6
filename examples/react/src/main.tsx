// Entry point: read the settings from the address and render the page.
import { createRoot } from "react-dom/client";
import { App } from "./App.js";
import { readConfig } from "./config.js";

const root = document.getElementById("root");
if (root === null) {
  throw new Error("the page has no #root element");
}
createRoot(root).render(<App config={readConfig(window.location)} />);
