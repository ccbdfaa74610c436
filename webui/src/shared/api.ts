// Talking to the deltaserve server from the page: the API key (asked for when the server
// answers 401, kept in sessionStorage for this tab only) and JSON requests.
import { byId } from './dom.js';

const KEY = 'deltaserve.apiKey';

export function apiKey(): string | null {
  return sessionStorage.getItem(KEY);
}

export function authHeaders(): Record<string, string> {
  const k = apiKey();
  return k ? { authorization: `Bearer ${k}` } : {};
}

/** An error the server answered in OpenAI's shape {error: {message, code}}. */
export class ServerError extends Error {
  constructor(readonly status: number, message: string, readonly code: string | null) {
    super(message);
  }
}

export async function errorOf(res: Response): Promise<ServerError> {
  let message = `${res.status} ${res.statusText}`;
  let code: string | null = null;
  try {
    const body = (await res.json()) as { error?: { message?: string; code?: string | null } };
    if (body.error?.message) message = body.error.message;
    code = body.error?.code ?? null;
  } catch {
    // not JSON: keep the status line
  }
  return new ServerError(res.status, message, code);
}

/** GET a JSON route; on 401 ask for the API key (once per call) and retry. */
export async function getJson<T>(path: string): Promise<T> {
  for (;;) {
    const res = await fetch(path, { headers: authHeaders(), cache: 'no-store' });
    if (res.ok) return (await res.json()) as T;
    const err = await errorOf(res);
    if (res.status !== 401) throw err;
    await askForKey(apiKey() ? 'That key was not accepted.' : 'This server needs an API key.');
  }
}

/** Show the key dialog (#key-dialog in the page) and resolve once a key was entered. */
export function askForKey(why: string): Promise<void> {
  const dialog = byId<HTMLDialogElement>('key-dialog');
  const input = byId<HTMLInputElement>('key-input');
  byId('key-why').textContent = why;
  input.value = '';
  return new Promise((resolve) => {
    const form = dialog.querySelector('form')!;
    const done = (e: Event): void => {
      e.preventDefault();
      if (input.value.trim() === '') return;
      sessionStorage.setItem(KEY, input.value.trim());
      form.removeEventListener('submit', done);
      dialog.close();
      resolve();
    };
    form.addEventListener('submit', done);
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
}
