// Images attached to the next message: the attach button (a file picker), images pasted
// into the message box, and image files dropped on the chat. Each is read into a data: URL
// (what Chat Completions' image_url takes) and previewed above the message box with a
// remove button. The server decodes and judges the bytes (a corrupt or unsupported image is
// its 400, shown under the box); here only files that are not images at all are refused.
// A text-only model (the model card's `images` is null) gets no attach button, and pasted
// or dropped images are refused with a message saying why.
import { byId, h, replaceChildren } from '../shared/dom.js';
import type { ImageAttachment } from './types.js';

/** What the model card (/metrics.json `model.images`) says of images; null: text-only. */
export interface ImagesCard {
  readonly max_images: number;
  readonly max_image_pixels: number;
}

function readDataUrl(file: File): Promise<string> {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result));
    r.onerror = () => reject(r.error ?? new Error(`reading ${file.name} failed`));
    r.readAsDataURL(file);
  });
}

/** Browsers name a pasted screenshot image.png. */
const nameOf = (f: File): string => (f.name !== '' && f.name !== 'image.png' ? f.name : 'pasted image');

export class Attachments {
  private pending: ImageAttachment[] = [];
  /** null until the model card is read, then whether the model takes images. */
  private card: ImagesCard | null = null;
  private readonly list = byId('attachments');
  private readonly button = byId<HTMLButtonElement>('attach');
  private readonly file = byId<HTMLInputElement>('attach-file');

  /** `problem` shows a message under the message box ('' clears it). */
  constructor(private readonly problem: (text: string) => void) {}

  bind(input: HTMLTextAreaElement, dropZone: HTMLElement, composer: HTMLElement): void {
    this.button.addEventListener('click', () => this.file.click());
    this.file.addEventListener('change', () => {
      const files = [...(this.file.files ?? [])];
      this.file.value = '';
      void this.add(files);
    });
    input.addEventListener('paste', (e) => {
      const files = [...(e.clipboardData?.files ?? [])];
      if (files.length === 0) return;
      // an image copied from a page also carries its text: paste that as usual
      if (!e.clipboardData?.types.includes('text/plain')) e.preventDefault();
      void this.add(files);
    });
    const hasFiles = (e: DragEvent): boolean => e.dataTransfer?.types.includes('Files') ?? false;
    dropZone.addEventListener('dragover', (e) => {
      if (!hasFiles(e)) return;
      e.preventDefault();
      composer.classList.add('dragging');
    });
    dropZone.addEventListener('dragleave', (e) => {
      if (e.relatedTarget === null || !dropZone.contains(e.relatedTarget as Node)) composer.classList.remove('dragging');
    });
    dropZone.addEventListener('drop', (e) => {
      composer.classList.remove('dragging');
      if (!hasFiles(e)) return;
      e.preventDefault();
      void this.add([...(e.dataTransfer?.files ?? [])]);
    });
  }

  /** The model card was read: offer attachments only for a model with a vision tower. */
  setCard(card: ImagesCard | null): void {
    this.card = card;
    this.button.hidden = card === null;
    this.button.disabled = card === null;
    if (card) this.button.title = `Attach images (or paste or drop them): PNG, JPEG, WebP, GIF; at most ${card.max_images} per request`;
  }

  get count(): number {
    return this.pending.length;
  }

  /** The pending images, handed to a message (the previews clear). */
  take(): ImageAttachment[] {
    const out = this.pending;
    this.pending = [];
    this.render();
    return out;
  }

  /** Put images back (a message the server refused returns to the composer). */
  restore(images: readonly ImageAttachment[]): void {
    this.pending = [...images, ...this.pending];
    this.render();
  }

  private async add(files: File[]): Promise<void> {
    if (files.length === 0) return;
    if (this.card === null) {
      this.problem('This model is text-only (no vision tower): images cannot be attached.');
      return;
    }
    const refused = files.filter((f) => !f.type.startsWith('image/'));
    const images = files.filter((f) => f.type.startsWith('image/'));
    try {
      const read = await Promise.all(images.map(async (f) => ({ url: await readDataUrl(f), name: nameOf(f) })));
      this.pending.push(...read);
    } catch (e) {
      this.problem(`An image could not be read: ${(e as Error).message}`);
      return;
    }
    this.problem(refused.length === 0 ? ''
      : `Not an image: ${refused.map((f) => `${f.name || 'the pasted item'} (${f.type || 'unknown type'})`).join(', ')}. Attach PNG, JPEG, WebP or GIF.`);
    this.render();
  }

  private render(): void {
    this.list.hidden = this.pending.length === 0;
    replaceChildren(this.list, ...this.pending.map((a, i) => h('li', { class: 'attachment' },
      h('img', { src: a.url, alt: a.name, title: a.name }),
      h('button', { type: 'button', class: 'remove', 'aria-label': `Remove ${a.name}`, title: `Remove ${a.name}`, onclick: () => this.remove(i) }, '×'))));
  }

  private remove(i: number): void {
    this.pending.splice(i, 1);
    this.render();
    (this.list.querySelector<HTMLButtonElement>('button.remove') ?? byId('input')).focus();
  }
}
