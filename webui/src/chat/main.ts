// The chat page (`/`): conversations kept in IndexedDB, answers streamed from
// /v1/chat/completions with reasoning, tool calls, structured output, image attachments
// (models with a vision tower) and per-answer stats.
import '../../styles/chat.css';
import { getJson, ServerError } from '../shared/api.js';
import { Attachments, type ImagesCard } from './attach.js';
import { byId, h } from '../shared/dom.js';
import { ConversationStore, exportJson, newConversation, parseImport } from './db.js';
import { earlierImagesCut, type ImageLimit, type ImagePlan, imagePlan, imageView, sendsEarlierImages } from './history.js';
import { bindSettings, loadSettings, requestBody } from './settings.js';
import { download, renderSidebar } from './sidebar.js';
import { streamChat } from './stream.js';
import type { AssistantMessage, Conversation, Message, ToolCall } from './types.js';
import { LiveAnswer, type MessageActions, renderMessages } from './view.js';

interface ModelInfo {
  model: { id: string; spec_tokens: number; context: number; images?: ImagesCard | null };
}

class ChatApp {
  private list: Conversation[] = [];
  private current!: Conversation;
  private running: AbortController | null = null;
  private readonly settings = loadSettings();
  private readonly messagesEl = byId('messages');
  private readonly input = byId<HTMLTextAreaElement>('input');
  private readonly attachments = new Attachments((text) => this.composerProblem(text));
  /** The model card's image limits: undefined until read, null for a text-only model. */
  private imagesCard: ImagesCard | null | undefined = undefined;

  constructor(private readonly store: ConversationStore) {}

  async start(): Promise<void> {
    this.list = await this.store.list();
    this.current = this.list[0] ?? newConversation();
    bindSettings(this.settings, () => void this.showSettingsProblem());
    this.bindComposer();
    this.bindSidebar();
    this.render();
    this.showSettingsProblem();
    await this.loadModelInfo();
  }

  private async loadModelInfo(): Promise<void> {
    try {
      const info = await getJson<ModelInfo>('/metrics.json?since=' + Date.now());
      byId('model-name').textContent = info.model.id;
      byId('mtp-info').textContent = info.model.spec_tokens > 0
        ? `${info.model.spec_tokens} per round (server flag --spec-tokens; adapted to measured speed; not settable per request)`
        : 'off on this server (start with --spec-tokens N on a checkpoint with an MTP head)';
      byId('context-info').textContent = `${info.model.context} tokens`;
      this.imagesCard = info.model.images ?? null;
      this.attachments.setCard(this.imagesCard);
      if (!this.running) this.render();
    } catch (e) {
      byId('model-name').textContent = `(server unreachable: ${(e as Error).message})`;
    }
  }

  private bindComposer(): void {
    byId('composer').addEventListener('submit', (e) => {
      e.preventDefault();
      this.sendInput();
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.sendInput();
      }
    });
    byId('stop').addEventListener('click', () => this.running?.abort());
    this.attachments.bind(this.input, byId('chat'), byId('composer'));
    byId('toggle-settings').addEventListener('click', () => document.body.classList.toggle('settings-open'));
    byId('toggle-sidebar').addEventListener('click', () => this.showSidebar(!document.body.classList.contains('sidebar-open')));
    byId('scrim').addEventListener('click', () => this.showSidebar(false));
  }

  /** Narrow screens: the sidebar is an overlay opened from the header. */
  private showSidebar(open: boolean): void {
    document.body.classList.toggle('sidebar-open', open);
    byId('toggle-sidebar').setAttribute('aria-expanded', String(open));
  }

  private bindSidebar(): void {
    byId('new-chat').addEventListener('click', () => {
      if (this.running) return;
      this.current = newConversation();
      this.showSidebar(false);
      this.render();
      this.input.focus();
    });
    byId('export').addEventListener('click', () => download(`deltaserve-chats-${new Date().toISOString().slice(0, 10)}.json`, exportJson(this.list)));
    const file = byId<HTMLInputElement>('import-file');
    byId('import').addEventListener('click', () => file.click());
    file.addEventListener('change', () => void this.importFile(file));
  }

  private async importFile(file: HTMLInputElement): Promise<void> {
    const f = file.files?.[0];
    file.value = '';
    if (!f) return;
    try {
      const convs = parseImport(await f.text());
      for (const c of convs) await this.store.put(c);
      this.list = await this.store.list();
      // the open conversation is the list's object again (renames and saves go to one copy)
      this.current = this.list.find((c) => c.id === this.current.id) ?? this.current;
      this.notice(`Imported ${convs.length} conversation${convs.length === 1 ? '' : 's'}.`);
      this.render();
    } catch (e) {
      this.notice(`Import failed: ${(e as Error).message}`, true);
    }
  }

  private notice(text: string, bad = false): void {
    const el = byId('notice');
    el.textContent = text;
    el.className = bad ? 'notice bad' : 'notice';
    el.hidden = text === '';
  }

  /** A problem with what is being sent, shown under the message box ('' hides it). */
  private composerProblem(text: string): void {
    const el = byId('composer-error');
    el.textContent = text;
    el.hidden = text === '';
  }

  /** A settings field that does not parse is named before anything is sent (false then). */
  private showSettingsProblem(): boolean {
    try {
      requestBody(this.settings, []);
      this.notice('');
      return true;
    } catch (e) {
      this.notice((e as Error).message, true);
      return false;
    }
  }

  /** Nothing runs and the settings parse: the conversation may change and be answered. */
  private canSend(): boolean {
    return this.running === null && this.showSettingsProblem();
  }

  /** What the page knows of the server's --max-images (history.ts). */
  private imageLimit(): ImageLimit {
    return this.imagesCard === undefined ? null : this.imagesCard === null ? 0 : this.imagesCard.max_images;
  }

  /** Which of `conv`'s images the next request sends. */
  private imagePlanOf(conv: Conversation): ImagePlan {
    return imagePlan(conv.messages, this.imageLimit(), conv.imagesFrom ?? 0);
  }

  /** Keep the messages before `index`; a cut set for images that are gone goes with them. */
  private truncate(index: number): void {
    const c = this.current;
    c.messages = c.messages.slice(0, index);
    if (c.imagesFrom !== undefined) c.imagesFrom = Math.min(c.imagesFrom, imagePlan(c.messages, null).total);
  }

  private readonly actions: MessageActions = {
    edit: (index, text) => {
      if (text.trim() === '' || !this.canSend()) return;
      const old = this.current.messages[index];
      const images = old?.role === 'user' ? old.images : undefined;
      this.truncate(index);
      this.current.messages.push({ role: 'user', content: text, ...(images ? { images } : {}) });
      void this.answer();
    },
    regenerate: (index) => {
      if (!this.canSend()) return;
      this.truncate(index);
      void this.answer();
    },
    toolResult: (call: ToolCall, text: string) => {
      if (!this.canSend()) return;
      this.current.messages.push({ role: 'tool', tool_call_id: call.id, name: call.name, content: text });
      if (this.unansweredCalls() === 0) void this.answer();
      else void this.save().then(() => this.render());
    },
  };

  private unansweredCalls(): number {
    const msgs = this.current.messages;
    const last = msgs.map((m) => m.role).lastIndexOf('assistant');
    const a = msgs[last] as AssistantMessage | undefined;
    const answered = new Set(msgs.slice(last + 1).flatMap((m) => (m.role === 'tool' ? [m.tool_call_id] : [])));
    return (a?.tool_calls ?? []).filter((c) => !answered.has(c.id)).length;
  }

  private render(): void {
    renderSidebar(this.list, this.current.id, {
      select: (id) => {
        if (this.running) return;
        this.current = this.list.find((c) => c.id === id) ?? this.current;
        this.showSidebar(false);
        this.render();
      },
      rename: (id, title) => void this.rename(id, title),
      remove: (id) => void this.remove(id),
    });
    byId('title').textContent = this.current.title;
    const msgs = this.current.messages;
    renderMessages(this.messagesEl, msgs, this.actions, this.running !== null, imageView(msgs, this.imagePlanOf(this.current)));
    byId('empty').hidden = this.current.messages.length > 0;
    document.body.classList.toggle('busy', this.running !== null);
    this.scrollDown();
  }

  private scrollDown(): void {
    const box = byId('scroll');
    box.scrollTop = box.scrollHeight;
  }

  private async rename(id: string, title: string): Promise<void> {
    const c = this.list.find((x) => x.id === id);
    if (c) {
      c.title = title;
      if (this.current.id === id) this.current.title = title;
      await this.store.put(c);
    }
    this.render();
  }

  private async remove(id: string): Promise<void> {
    await this.store.delete(id);
    this.list = this.list.filter((c) => c.id !== id);
    if (this.current.id === id) this.current = this.list[0] ?? newConversation();
    this.render();
  }

  private async save(): Promise<void> {
    const c = this.current;
    c.updated = Date.now();
    if (c.title === 'New chat') {
      const first = c.messages.find((m) => m.role === 'user');
      if (first) c.title = first.content.replace(/\s+/g, ' ').trim().slice(0, 48) || (first.images?.length ? 'Image' : 'New chat');
    }
    await this.store.put(c);
    if (!this.list.includes(c)) this.list.unshift(c);
    this.list.sort((a, b) => b.updated - a.updated);
  }

  /** Save `conv`, or drop it from the list and the store once it has no message left. */
  private async keepOrForget(conv: Conversation): Promise<void> {
    if (conv.messages.length > 0) return this.save();
    await this.store.delete(conv.id);
    this.list = this.list.filter((c) => c !== conv);
  }

  private sendInput(): void {
    const text = this.input.value;
    if ((text.trim() === '' && this.attachments.count === 0) || !this.canSend()) return;
    const most = this.imagesCard?.max_images;
    if (most !== undefined && this.attachments.count > most) {
      this.composerProblem(`This server takes at most ${most} images per request (serve --max-images): remove ${this.attachments.count - most}.`);
      return;
    }
    this.input.value = '';
    this.composerProblem('');
    const images = this.attachments.take();
    this.current.messages.push({ role: 'user', content: text, ...(images.length > 0 ? { images } : {}) });
    void this.answer();
  }

  /** The server refused the request (before answering) whose last message has images, or
   * any request as over the model's context: the message goes back to the composer, images
   * included, with the server's reason under it, so the image at fault can be removed and
   * the rest sent again (or the text taken to a new chat). False: not that case. */
  private takeBack(conv: Conversation, e: unknown): boolean {
    const last = conv.messages.at(-1);
    if (!(e instanceof ServerError) || last?.role !== 'user') return false;
    const tooLong = e.code === 'context_length_exceeded';
    if (!tooLong && !last.images?.length) return false;
    conv.messages.pop();
    if (this.input.value === '') this.input.value = last.content;
    this.attachments.restore(last.images ?? []);
    this.composerProblem(`Not sent: ${e.message}${tooLong ? '. The conversation no longer fits the model\'s context: start a new chat, or edit an earlier message (what follows it is dropped).' : ''}`);
    return true;
  }

  /** The prompt was over the model's context while it still sent images from earlier turns:
   * leave those out from now on (the cut is kept on the conversation, so later turns keep
   * the same prefix) and answer again. False: not that case. */
  private fitWithoutEarlierImages(conv: Conversation, plan: ImagePlan, e: unknown): boolean {
    if (!(e instanceof ServerError) || e.code !== 'context_length_exceeded' || !sendsEarlierImages(plan)) return false;
    conv.imagesFrom = earlierImagesCut(plan);
    return true;
  }

  /** Stream the model's answer to the conversation so far. */
  private async answer(): Promise<void> {
    const conv = this.current;
    let body: Record<string, unknown>;
    const plan = this.imagePlanOf(conv);
    try {
      body = requestBody(this.settings, conv.messages, plan);
    } catch (e) {
      this.notice((e as Error).message, true);
      this.render();
      return;
    }
    const m: AssistantMessage = { role: 'assistant', content: '', reasoning: '' };
    if (body['response_format']) m.schema = this.settings.schema;
    this.running = new AbortController();
    await this.save();
    this.render();
    const live = new LiveAnswer(m, () => this.scrollDown());
    this.messagesEl.appendChild(live.el);
    this.scrollDown();
    try {
      m.stats = await streamChat(body, this.running.signal, {
        onReasoning: (t) => {
          m.reasoning += t;
          m.reasoning_tokens = (m.reasoning_tokens ?? 0) + 1;
          live.update();
        },
        onContent: (t) => {
          m.content += t;
          live.update();
        },
        onToolCalls: (calls) => {
          m.tool_calls = calls;
          live.update();
        },
      });
    } catch (e) {
      m.error = (e as Error).message;
      const retry = this.fitWithoutEarlierImages(conv, plan, e);
      if (retry || this.takeBack(conv, e)) {
        this.running = null;
        live.finish();
        live.el.remove();
        if (retry) return this.answer();
        await this.keepOrForget(conv);
        this.render();
        return;
      }
    }
    if (m.tool_calls?.length === 0) delete m.tool_calls;
    conv.messages.push(m as Message);
    this.running = null;
    live.finish();
    await this.save();
    if (this.current === conv) this.render();
  }
}

async function main(): Promise<void> {
  const app = new ChatApp(await ConversationStore.open());
  await app.start();
  document.body.classList.add('ready');
}

main().catch((e: unknown) => {
  document.body.appendChild(h('div', { class: 'notice bad fatal' }, `The chat page failed to start: ${(e as Error).message}`));
});
