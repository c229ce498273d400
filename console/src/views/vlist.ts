// A list that renders only the rows in view (plus a few either side), so a queue of
// thousands scrolls as smoothly as one of ten. Rows have a fixed height; each is positioned
// with a transform inside a spacer as tall as the whole list.
//
// It is a listbox: arrow keys (and j/k) move the active row, Enter opens it. The active row
// is always rendered (moving scrolls it into view), so `aria-activedescendant` never points
// at nothing. Empty, it is a group with the empty text (a listbox without options is an
// error to assistive technology).

import { h } from "../dom";

export interface ListOptions<T> {
  label: string;
  rowHeight: number;
  key(item: T): string;
  /** Changes when the row must be drawn again (e.g. a version). */
  stamp(item: T): string;
  render(item: T, active: boolean): HTMLElement;
  open(item: T): void;
  nearEnd?(): void;
  empty(): HTMLElement;
}

const OVERSCAN = 6;

export class VirtualList<T> {
  readonly el: HTMLElement;
  private readonly spacer: HTMLElement;
  private items: T[] = [];
  private activeKey: string | null = null;
  private drawn = new Map<string, { el: HTMLElement; stamp: string; index: number }>();
  private frame = 0;
  private emptyEl: HTMLElement | null = null;

  constructor(private readonly opts: ListOptions<T>) {
    this.spacer = h("div", { class: "vlist-spacer" });
    this.el = h(
      "div",
      {
        class: "vlist",
        role: "listbox",
        tabIndex: 0,
        "aria-label": opts.label,
        on: { scroll: () => this.schedule(), keydown: (e) => this.onKey(e as KeyboardEvent) },
      },
      this.spacer,
    );
    new ResizeObserver(() => this.schedule()).observe(this.el);
  }

  get active(): T | undefined {
    return this.items.find((i) => this.opts.key(i) === this.activeKey);
  }

  get size(): number {
    return this.items.length;
  }

  /** Rows currently in the DOM (for tests and diagnostics). */
  get renderedCount(): number {
    return this.drawn.size;
  }

  setItems(items: T[]): void {
    this.items = items;
    if (this.activeKey && !items.some((i) => this.opts.key(i) === this.activeKey)) this.activeKey = null;
    this.spacer.style.height = `${items.length * this.opts.rowHeight}px`;
    // A listbox must own options (axe: aria-required-children). While there are none the
    // list is a labelled group holding the text that says why, and a listbox again once
    // rows come back.
    if (items.length === 0 && !this.emptyEl) {
      this.emptyEl = this.opts.empty();
      this.el.appendChild(this.emptyEl);
      this.el.setAttribute("role", "group");
    } else if (items.length > 0 && this.emptyEl) {
      this.emptyEl.remove();
      this.emptyEl = null;
      this.el.setAttribute("role", "listbox");
    }
    this.render();
  }

  setActive(key: string | null, scroll = true): void {
    this.activeKey = key;
    const index = key ? this.items.findIndex((i) => this.opts.key(i) === key) : -1;
    if (index >= 0 && scroll) this.scrollTo(index);
    this.render();
  }

  move(delta: number): void {
    if (this.items.length === 0) return;
    const current = this.activeKey ? this.items.findIndex((i) => this.opts.key(i) === this.activeKey) : -1;
    // Nothing active yet: moving down starts at the top, moving up at the bottom.
    const from = current >= 0 ? current : delta > 0 ? -1 : this.items.length;
    const next = Math.min(this.items.length - 1, Math.max(0, from + delta));
    this.setActive(this.opts.key(this.items[next]));
  }

  private scrollTo(index: number): void {
    const top = index * this.opts.rowHeight;
    const bottom = top + this.opts.rowHeight;
    if (top < this.el.scrollTop) this.el.scrollTop = top;
    else if (bottom > this.el.scrollTop + this.el.clientHeight) this.el.scrollTop = bottom - this.el.clientHeight;
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private onKey(e: KeyboardEvent): void {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const page = Math.max(1, Math.floor(this.el.clientHeight / this.opts.rowHeight) - 1);
    const moves: Record<string, number> = {
      ArrowDown: 1,
      j: 1,
      ArrowUp: -1,
      k: -1,
      PageDown: page,
      PageUp: -page,
      Home: -Infinity,
      End: Infinity,
    };
    if (e.key in moves) {
      e.preventDefault();
      e.stopPropagation();
      const d = moves[e.key];
      this.move(Number.isFinite(d) ? d : d > 0 ? this.items.length : -this.items.length);
    } else if (e.key === "Enter" || e.key === " ") {
      const item = this.active;
      if (item) {
        e.preventDefault();
        e.stopPropagation();
        this.opts.open(item);
      }
    }
  }

  render(): void {
    const { rowHeight } = this.opts;
    const height = this.el.clientHeight || 600;
    const first = Math.max(0, Math.floor(this.el.scrollTop / rowHeight) - OVERSCAN);
    const last = Math.min(this.items.length - 1, Math.ceil((this.el.scrollTop + height) / rowHeight) + OVERSCAN);
    const keep = new Set<string>();
    for (let index = first; index <= last; index++) {
      const item = this.items[index];
      const key = this.opts.key(item);
      const active = key === this.activeKey;
      const stamp = `${this.opts.stamp(item)}|${active}|${index}|${this.items.length}`;
      keep.add(key);
      let row = this.drawn.get(key);
      if (!row || row.stamp !== stamp) {
        const el = this.opts.render(item, active);
        el.id = `row-${key}`;
        el.setAttribute("role", "option");
        el.setAttribute("aria-selected", String(active));
        el.setAttribute("aria-setsize", String(this.items.length));
        el.setAttribute("aria-posinset", String(index + 1));
        el.classList.add("vrow");
        el.addEventListener("click", () => {
          this.setActive(key, false);
          this.opts.open(item);
        });
        if (row) row.el.replaceWith(el);
        else this.spacer.appendChild(el);
        row = { el, stamp, index };
        this.drawn.set(key, row);
      }
      row.el.style.transform = `translateY(${index * rowHeight}px)`;
    }
    for (const [key, row] of this.drawn) {
      if (!keep.has(key)) {
        row.el.remove();
        this.drawn.delete(key);
      }
    }
    if (this.activeKey && this.drawn.has(this.activeKey)) {
      this.el.setAttribute("aria-activedescendant", `row-${this.activeKey}`);
    } else {
      this.el.removeAttribute("aria-activedescendant");
    }
    if (this.opts.nearEnd && last >= this.items.length - 20) this.opts.nearEnd();
  }
}
