import { jsonObjectBody } from '../bodies.js';
import { type HeadPatch, HeadShape, type ReferenceStore } from '../store.js';
import { dictValue, stringValue, type ValidationIssue } from '../validation.js';
import { type Handler, HEAD_NOT_FOUND, knownUuid, patchField, pathUuid } from './shared.js';

const DICT_FIELDS = ['output_format', 'style', 'version', 'head_metadata'] as const;

/** Update Head: every wrong field is reported together, as pydantic does. */
export const updateHead: Handler = (ex, store) => {
  const issues: ValidationIssue[] = [];
  const id = pathUuid(ex, 'head_id', issues);
  const body = jsonObjectBody(ex.body, issues);
  const patch = body === undefined ? {} : headPatch(body, store, issues);
  if (issues.length > 0 || id === undefined) return ex.sendIssues(issues);
  const entry = store.findHead(id);
  if (entry === undefined) return ex.send(404, HEAD_NOT_FOUND);
  if (patch.hair_color !== undefined && patch.hair_id === undefined && entry.head.hair_id === undefined) {
    return ex.sendIssues([
      {
        type: 'value_error',
        loc: ['body', 'hair_color'],
        msg: 'Value error, the head has no hair to colour',
        input: patch.hair_color,
      },
    ]);
  }
  const updated = store.updateHead(id, patch)!;
  ex.send(200, store.headJson(updated, HeadShape.A));
};

function headPatch(body: Record<string, unknown>, store: ReferenceStore, issues: ValidationIssue[]): HeadPatch {
  const patch: HeadPatch = {};
  // null means "not given": name is required on a head, so null cannot mean "clear".
  patchField(patch, body, 'name', (input, loc, found) => stringValue(input, loc, found, 100), issues);
  for (const name of DICT_FIELDS) patchField(patch, body, name, dictValue, issues);
  patchField(
    patch,
    body,
    'hair_id',
    knownUuid((id) => store.hasHair(id), 'hair'),
    issues,
  );
  patchField(patch, body, 'hair_color', stringValue, issues);
  return patch;
}
