import { fromBinary, toJson, type DescMethod } from "@bufbuild/protobuf";
import { createAsyncIterable, transformSplitEnvelope, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { endStreamFlag, endStreamFromJson } from "@connectrpc/connect/protocol-connect";
import { describeError } from "../errors/index.ts";
import { errorReply, JSON_WRITE_OPTIONS, universalResponse } from "./response.ts";

const encoder = new TextEncoder();

type Envelope = { flags: number; data: Uint8Array };

/**
 * A server-streaming handler's Connect response as server-sent events (text/event-stream): each
 * response message is one event, `data: <its proto JSON>`; an error ending the stream is
 * `event: error` with the API's JSON error body. A stream that fails before its first message
 * (an unknown session, a refused request) is answered as an ordinary JSON error with the
 * catalogue's HTTP status instead, since nothing has been streamed yet.
 */
export async function eventStream(method: DescMethod, response: UniversalServerResponse, readMaxBytes: number): Promise<UniversalServerResponse> {
  const envelopes = transformSplitEnvelope(readMaxBytes)(response.body ?? createAsyncIterable([]))[Symbol.asyncIterator]();
  const first = await envelopes.next();
  if (!first.done && isEnd(first.value)) {
    const { error } = endStreamFromJson(first.value.data);
    if (error) return universalResponse(errorReply(error));
  }
  const header = new Headers({ "content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no" });
  return { status: 200, header, body: events(method, first, envelopes) };
}

async function* events(method: DescMethod, first: IteratorResult<Envelope>, rest: AsyncIterator<Envelope>): AsyncIterable<Uint8Array> {
  for (let next = first; !next.done; next = await rest.next()) {
    const envelope = next.value;
    if (isEnd(envelope)) {
      const { error } = endStreamFromJson(envelope.data);
      if (error) yield encoder.encode(`event: error\ndata: ${JSON.stringify(describeError(error).body)}\n\n`);
      return;
    }
    const json = toJson(method.output, fromBinary(method.output, envelope.data), JSON_WRITE_OPTIONS);
    yield encoder.encode(`data: ${JSON.stringify(json)}\n\n`);
  }
}

function isEnd(envelope: Envelope): boolean {
  return (envelope.flags & endStreamFlag) === endStreamFlag;
}
