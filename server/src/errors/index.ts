export { errorCatalogue, ERROR_DOMAIN, isErrorCode, type ErrorCode, type ErrorSpec } from "./catalogue.ts";
export {
  describeError,
  ERROR_DETAILS,
  RETRY_AFTER,
  retryableRefusal,
  serviceError,
  stableCodeOf,
  type DescribedError,
  type ErrorBody,
} from "./service-error.ts";
