import { useDeferStream } from '@graphql-yoga/plugin-defer-stream';
import { OverlappingFieldsCanBeMergedRule } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/**
 * @defer and @stream (GraphQL over HTTP incremental delivery: multipart/mixed, or SSE): yoga's
 * plugin. It adds its own copy of graphql-js's field-merging rule (one that knows @stream), but
 * its attempt to drop graphql-js's rule does not reach envelop's rule list, so both would run;
 * and the copy lacks graphql-js 16.15's complexity budget (twice as slow on hostile documents).
 * The copy is taken out again, in place; graphql-js's rule stays. (A differing @stream on merged
 * fields is then not refused: execution takes the first.)
 */
export function useIncrementalDelivery(): Plugin[] {
  return [
    useDeferStream() as Plugin,
    {
      onValidate({ params }) {
        const rules = params.rules ?? [];
        for (let i = rules.length - 1; i >= 0; i--) {
          const rule = rules[i]!;
          if (rule.name === OverlappingFieldsCanBeMergedRule.name && rule !== OverlappingFieldsCanBeMergedRule) rules.splice(i, 1);
        }
      },
    },
  ];
}
