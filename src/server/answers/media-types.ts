import type { AnswerType } from '../incoming.js';

/** By the kind of answer each writes, in the order a later match wins (yoga's result processors'). */
const writers: readonly { readonly types: readonly AnswerType[]; readonly parts: boolean }[] = [
  { types: ['text/event-stream'], parts: true },
  { types: ['multipart/mixed'], parts: true },
  { types: ['application/graphql-response+json', 'application/json'], parts: false },
];

/** An Accept's media ranges but those with a charset other than UTF-8, least preferred first (yoga's reading). */
function rangesOf(accept: string): string[] {
  const ranges: string[] = [];
  // A quoted charset (`charset="utf-8"`) is the same charset.
  for (const entry of accept.replace(/[\s"]/g, '').toLowerCase().split(',')) {
    const [range, ...parameters] = entry.split(';');
    if (range === undefined) continue;
    const charset = parameters.find((parameter) => parameter.includes('charset=')) ?? 'charset=utf-8';
    if (charset === 'charset=utf-8') ranges.push(range);
  }
  return ranges.reverse();
}

const matches = (type: string, range: string): boolean => {
  const [rangeType, rangeSub] = range.split('/');
  const [typeType, typeSub] = type.split('/');
  return (rangeType === '*' || rangeType === typeType) && (rangeSub === '*' || rangeSub === typeSub);
};

/** yoga's choice: the most preferred range a writer takes (parts never as JSON); undefined (406) when none does. */
export function answerTypeFor(accept: string, parts: boolean): AnswerType | undefined {
  const ranges = rangesOf(accept);
  let chosen: AnswerType | undefined;
  for (const writer of writers) {
    if (parts && !writer.parts) continue;
    for (const range of ranges) for (const type of writer.types) if (matches(type, range)) chosen = type;
  }
  return chosen;
}
