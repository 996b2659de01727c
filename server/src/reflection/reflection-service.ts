import { create, fromBinary, toBinary, type DescFile, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { Code, type ServiceImpl } from "@connectrpc/connect";
import * as v1 from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import * as v1alpha from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import type { DescriptorIndex } from "./descriptor-index.ts";

type Answer = v1.ServerReflectionResponse["messageResponse"];

/**
 * grpc.reflection.v1.ServerReflection: each request on the stream gets one response. A lookup that
 * finds nothing is an error_response (NOT_FOUND) on a stream that stays open, as grpc-go answers.
 */
export function reflectionV1(index: () => DescriptorIndex): ServiceImpl<typeof v1.ServerReflection> {
  return { serverReflectionInfo: (requests) => respond(index(), requests) };
}

/**
 * grpc.reflection.v1alpha.ServerReflection, which older clients still ask for. Its messages have
 * the same fields and numbers as v1's, so they are answered as v1's, translated through their bytes.
 */
export function reflectionV1alpha(index: () => DescriptorIndex): ServiceImpl<typeof v1alpha.ServerReflection> {
  return {
    async *serverReflectionInfo(requests) {
      const asV1 = map(requests, (request) => translate(v1alpha.ServerReflectionRequestSchema, v1.ServerReflectionRequestSchema, request));
      yield* map(respond(index(), asV1), (response) => translate(v1.ServerReflectionResponseSchema, v1alpha.ServerReflectionResponseSchema, response));
    },
  };
}

/** One stream: the files it has sent are not sent again as imports. */
async function* respond(index: DescriptorIndex, requests: AsyncIterable<v1.ServerReflectionRequest>): AsyncIterable<v1.ServerReflectionResponse> {
  const sent = new Set<DescFile>();
  for await (const request of requests) {
    const messageResponse = answer(index, request.messageRequest, sent);
    yield create(v1.ServerReflectionResponseSchema, { validHost: request.host, originalRequest: request, messageResponse });
  }
}

function answer(index: DescriptorIndex, request: v1.ServerReflectionRequest["messageRequest"], sent: Set<DescFile>): Answer {
  switch (request.case) {
    case "fileByFilename":
      return files(index, index.file(request.value), sent, `no file named ${request.value}`);
    case "fileContainingSymbol":
      return files(index, index.fileOfSymbol(request.value), sent, `no symbol named ${request.value}`);
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = request.value;
      return files(index, index.fileOfExtension(containingType, extensionNumber), sent, `no extension ${extensionNumber} of ${containingType}`);
    }
    case "allExtensionNumbersOfType": {
      const numbers = index.extensionNumbers(request.value);
      if (numbers === undefined) return failure(Code.NotFound, `no message type named ${request.value}`);
      const value = create(v1.ExtensionNumberResponseSchema, { baseTypeName: request.value, extensionNumber: numbers });
      return { case: "allExtensionNumbersResponse", value };
    }
    case "listServices": {
      const value = create(v1.ListServiceResponseSchema, { service: index.serviceNames.map((name) => ({ name })) });
      return { case: "listServicesResponse", value };
    }
    case undefined:
      return failure(Code.InvalidArgument, "the request asks for nothing");
  }
}

function files(index: DescriptorIndex, file: DescFile | undefined, sent: Set<DescFile>, notFound: string): Answer {
  if (file === undefined) return failure(Code.NotFound, notFound);
  const value = create(v1.FileDescriptorResponseSchema, { fileDescriptorProto: index.encodeWithImports(file, sent) });
  return { case: "fileDescriptorResponse", value };
}

/** Connect's codes are gRPC's status codes, which error_code carries. */
function failure(code: Code, message: string): Answer {
  return { case: "errorResponse", value: create(v1.ErrorResponseSchema, { errorCode: code, errorMessage: message }) };
}

function translate<From extends DescMessage, To extends DescMessage>(from: From, to: To, message: MessageShape<From>): MessageShape<To> {
  return fromBinary(to, toBinary(from, message));
}

async function* map<A, B>(items: AsyncIterable<A>, convert: (item: A) => B): AsyncIterable<B> {
  for await (const item of items) yield convert(item);
}
