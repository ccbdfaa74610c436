// The conversation list: select, rename (inline), delete, and export / import as JSON.
import { byId, h, replaceChildren } from '../shared/dom.js';
import type { Conversation } from './types.js';

export interface SidebarActions {
  select(id: string): void;
  rename(id: string, title: string): void;
  remove(id: string): void;
}

export function renderSidebar(list: readonly Conversation[], current: string | null, actions: SidebarActions): void {
  replaceChildren(byId('conversations'), ...list.map((c) => {
    const title = h('button', { type: 'button', class: 'conv-title', title: c.title, onclick: () => actions.select(c.id) }, c.title);
    const item = h('li', { class: c.id === current ? 'conv active' : 'conv', 'data-id': c.id }, title);
    const rename = h('button', { type: 'button', class: 'icon conv-rename', title: 'Rename', 'aria-label': 'Rename' }, '✎');
    rename.addEventListener('click', () => {
      const input = h('input', { class: 'conv-input', value: c.title, 'aria-label': 'Conversation name' });
      const commit = (): void => actions.rename(c.id, input.value.trim() || c.title);
      input.addEventListener('keydown', (e) => {
        if (e.key === 'Enter') commit();
        if (e.key === 'Escape') actions.rename(c.id, c.title);
      });
      input.addEventListener('blur', commit);
      replaceChildren(item, input);
      input.select();
    });
    const del = h('button', { type: 'button', class: 'icon conv-delete', title: 'Delete', 'aria-label': 'Delete' }, '×');
    del.addEventListener('click', () => {
      if (confirm(`Delete "${c.title}"?`)) actions.remove(c.id);
    });
    item.append(rename, del);
    return item;
  }));
}

/** Offer `text` as a file download. */
export function download(name: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
  const a = h('a', { href: url, download: name });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
