import { decodeBase64 } from '@pothos/core';
import { offsetToCursor } from '@pothos/plugin-relay';
import { z } from 'zod';

/*
 * Page sizes and the cursors this gateway issues (Pothos's offset cursors), and the arguments of
 * a connection as every layer checks them: the plan before execution, the schema's resolvers.
 */

export const MAX_PAGE_SIZE = 100;
export const DEFAULT_PAGE_SIZE = 50;

const pageSize = z
  .number()
  .int()
  .min(1, { error: `must be between 1 and ${MAX_PAGE_SIZE}` })
  .max(MAX_PAGE_SIZE, { error: `must be between 1 and ${MAX_PAGE_SIZE}` })
  .nullish();

/** The largest offset a cursor may name: a forged 2^53-1 or 1e14 must not reach the upstream as a page number. */
const MAX_CURSOR_OFFSET = 2 ** 31 - 1;

/** What the cursors this gateway issues say (Pothos's offset cursors): `<prefix><n>`. */
const cursorPrefix = decodeBase64(offsetToCursor(0)).slice(0, -1);

/** Only cursors as this gateway issues them: n an integer from 0 to 2^31-1 written plainly. */
const cursor = z
  .string()
  .max(64, { error: 'Not a cursor of this connection' })
  .refine(
    (value) => {
      let text: string;
      try {
        text = decodeBase64(value);
      } catch {
        return false;
      }
      const digits = text.startsWith(cursorPrefix) ? text.slice(cursorPrefix.length) : '';
      return /^(0|[1-9]\d{0,9})$/.test(digits) && Number(digits) <= MAX_CURSOR_OFFSET;
    },
    { error: 'Not a cursor of this connection', params: { type: 'invalid_cursor' } },
  )
  .nullish();

/** `first`/`last` 1..100 and cursors this gateway issued; other arguments pass through. */
export const connectionArgsSchema = z
  .looseObject({ first: pageSize, last: pageSize, after: cursor, before: cursor })
  .refine((args) => args.first == null || args.last == null, {
    error: 'Give `first` or `last`, not both',
    path: ['last'],
    params: { type: 'first_and_last' },
  });
