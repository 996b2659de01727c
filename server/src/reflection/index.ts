import type { DescMessage } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandlerOptions } from "@connectrpc/connect/protocol";
import { ServerReflection as ServerReflectionV1 } from "../../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../../../gen/grpc/reflection/v1alpha/reflection_pb.js";
import { StatusSchema } from "../../../gen/google/rpc/status_pb.js";
import { DescriptorIndex } from "./descriptor-index.ts";
import { reflectionV1, reflectionV1alpha } from "./reflection-service.ts";

/** Both versions of the gRPC reflection service: v1, and the deprecated v1alpha that older clients ask for. */
export const reflectionServices = [ServerReflectionV1, ServerReflectionV1alpha] as const;

/**
 * Serves gRPC server reflection on the router, so grpcurl, `buf curl` and Postman can call the API
 * without its protos. It describes every service on the router (itself included) as the router
 * holds them at the first reflection request, so services registered after this call count too;
 * and the messages a failed call's status details carry (`errorDetails`), with google.rpc.Status
 * that carries them over gRPC, so that such a client shows the details decoded, not as bytes.
 */
export function serveReflection(router: ConnectRouter, errorDetails: readonly DescMessage[], options?: Partial<UniversalHandlerOptions>): void {
  let index: DescriptorIndex | undefined;
  const described = [StatusSchema, ...errorDetails];
  const indexOnFirstUse = () =>
    (index ??= new DescriptorIndex(
      router.handlers.map((handler) => handler.service),
      described,
    ));
  router.service(ServerReflectionV1, reflectionV1(indexOnFirstUse), options);
  router.service(ServerReflectionV1alpha, reflectionV1alpha(indexOnFirstUse), options);
}
