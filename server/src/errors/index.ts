export { errorCatalogue, ERROR_DOMAIN, isErrorCode, type ErrorCode, type ErrorSpec } from "./catalogue.ts";
export { describeError, ERROR_DETAILS, serviceError, stableCodeOf, type DescribedError, type ErrorBody } from "./service-error.ts";
