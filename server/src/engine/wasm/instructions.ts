/**
 * Opcodes of the core instructions the engine writes or singles out, by name. What every opcode's
 * immediates are, and what it costs, is the fuel decoder's table (fuel/opcodes.ts).
 */

export const UNREACHABLE = 0x00;
export const BLOCK = 0x02;
export const IF = 0x04;
export const END = 0x0b;
export const CALL = 0x10;
export const RETURN_CALL = 0x12;
export const LOCAL_GET = 0x20;
export const LOCAL_SET = 0x21;
export const LOCAL_TEE = 0x22;
export const GLOBAL_GET = 0x23;
export const GLOBAL_SET = 0x24;
export const I64_CONST = 0x42;
export const I64_LT_S = 0x53;
export const I64_SUB = 0x7d;
export const I64_SHL = 0x86;
export const I64_SHR_U = 0x88;
export const I64_EXTEND_I32_U = 0xad;
export const REF_FUNC = 0xd2;
