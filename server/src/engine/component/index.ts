export { ComponentFormatError, readComponentSections, TOO_LARGE, type ComponentSections, type ExternName, type ExternSort } from "./binary.ts";
export { checkImports, checkWorld, readComponent, worldOf, type ComponentWorld, type ImportedInterface } from "./check.ts";
export {
  ENTRYPOINT_TYPE,
  ENV_FUNCTIONS,
  HOST_INTERFACE,
  SUSPENDING_HOST_FUNCTIONS,
  TYPES_INTERFACE,
  unversioned,
  WASI_INTERFACES,
  WASI_VERSION,
  WORLDS,
  type Entrypoint,
  type WasiInterface,
  type World,
} from "./contract.ts";
