export type { BindingContext, DiscoveredTool, EnvironmentKind, EnvironmentKindName, EnvironmentKinds } from "./kinds.ts";
export {
  failure,
  returned,
  unknown,
  type AgentLoopHost,
  type EnvironmentBinding,
  type ExecuteOperation,
  type Failure,
  type InterimReceipt,
  type OperationKind,
  type Returned,
  type StagedFile,
  type Staging,
  type TerminalReceipt,
  type Unknown,
} from "./port.ts";
export { inReceiptSpan } from "./receipt-span.ts";
export {
  ServiceEnvironmentKind,
  startServiceEnvironment,
  type ServiceEnvironment,
  type ServiceImplementation,
  type ServiceKindOptions,
} from "./service/index.ts";
export { HostService } from "../../../gen/skillenv/env/v1/host_pb.js";
export { HostEnvironmentKind } from "./host/host-environment.ts";
export { HostHub } from "./host/hub.ts";
export { createHostService, type CheckHostBinding, type HostLog } from "./host/host-service.ts";
export { ExtensionEnvironmentKind, type ExtensionOptions } from "./extension/extension-environment.ts";
export { Sealer } from "./extension/sealer.ts";
export { McpEnvironmentKind, placementName, type McpKindOptions, type McpOptions } from "./mcp/index.ts";
