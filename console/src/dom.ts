// A few lines of DOM building instead of a framework. Text always goes in as text nodes,
// never as HTML, so nothing a customer writes can become markup (and the CSP forbids
// inline script anyway).

export type Child = Node | string | number | null | undefined | false;

type Handler = (event: Event) => void;

export interface Attrs {
  class?: string;
  text?: string;
  on?: Record<string, Handler>;
  [name: string]: unknown;
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") el.className = String(value);
      else if (name === "text") el.textContent = String(value);
      else if (name === "on") {
        for (const [type, fn] of Object.entries(value as Record<string, Handler>)) {
          el.addEventListener(type, fn);
        }
      } else if (name in el && !name.includes("-") && typeof value !== "string") {
        // Properties such as `disabled`, `checked`, `value`, `tabIndex`.
        (el as unknown as Record<string, unknown>)[name] = value;
      } else if (name === "value" && "value" in el) {
        (el as unknown as { value: string }).value = String(value);
      } else {
        el.setAttribute(name, value === true ? "" : String(value));
      }
    }
  }
  append(el, children);
  return el;
}

/**
 * A form that stays on the page: a submit clears `error` (the form's role=alert line) and
 * runs `submit` instead of the browser's navigation.
 */
export function submitForm(
  attrs: Attrs,
  error: HTMLElement,
  submit: (event: Event) => unknown,
  ...children: (Child | Child[])[]
): HTMLFormElement {
  const on: Record<string, Handler> = {
    ...attrs.on,
    submit: (event) => {
      event.preventDefault();
      error.textContent = "";
      void submit(event);
    },
  };
  return h("form", { ...attrs, on }, ...children);
}

export function append(el: Node, children: (Child | Child[])[]): void {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

/** Replaces everything inside `el`. */
export function mount(el: Element, ...children: (Child | Child[])[]): void {
  el.replaceChildren();
  append(el, children);
}

export function $(selector: string, root: ParentNode = document): HTMLElement | null {
  return root.querySelector<HTMLElement>(selector);
}

/** True when a key press is meant for a text field, not for the console's shortcuts. */
export function typing(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  const tag = target.tagName;
  return (
    target.isContentEditable ||
    tag === "TEXTAREA" ||
    tag === "SELECT" ||
    (tag === "INPUT" &&
      !["checkbox", "radio", "button", "submit"].includes((target as HTMLInputElement).type))
  );
}
