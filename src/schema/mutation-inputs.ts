import { z } from 'zod';

/** An update that changes nothing is a mistake worth telling the caller, not an upstream call. */
export function anyFieldGiven(fields: readonly string[], message: string) {
  return z
    .looseObject({})
    .refine((input) => fields.some((field) => input[field] !== undefined && input[field] !== null), {
      error: message,
      params: { type: 'nothing_to_change' },
    });
}
