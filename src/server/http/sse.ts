// Server-sent events in OpenAI's streaming form: `data: {json}\n\n` per chunk, then
// `data: [DONE]\n\n`. Writes after the client has gone are dropped silently.
import type { ServerResponse } from 'node:http';

export class SseStream {
  private ended = false;

  constructor(private readonly res: ServerResponse) {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
  }

  get open(): boolean {
    return !this.ended && !this.res.destroyed && !this.res.writableEnded;
  }

  send(data: unknown): void {
    if (this.open) this.res.write(`data: ${JSON.stringify(data)}\n\n`);
  }

  /** A named event (`event: TYPE` + data), as the Responses and Messages APIs stream. */
  event(type: string, data: unknown): void {
    if (this.open) this.res.write(`event: ${type}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** End the response without `[DONE]` (named-event streams have no terminator). */
  end(): void {
    if (!this.open) return;
    this.ended = true;
    this.res.end();
  }

  /** `data: [DONE]` and end the response. */
  done(): void {
    if (!this.open) return;
    this.ended = true;
    this.res.end('data: [DONE]\n\n');
  }
}
