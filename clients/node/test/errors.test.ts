import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MissingTokenError, StaleTokenError, mapError, parseDetail, tokenText } from '../src/index';

test('parses the DETAIL of a stale row', () => {
  const d = parseDetail('Relation public.t, key (id)=(1): presented token 5, stored token 7 (monotonic mode).');
  assert.deepEqual(d, { relation: 'public.t', key: '(id)=(1)', resource: null, presented: 5n, stored: 7n, mode: 'monotonic' });
});

test('keeps tokens above 2^53 exact', () => {
  const d = parseDetail(
    'Relation public."Odd, key" , key (a, b)=(x: presented token 1, y): presented token 9007199254740993, stored token 9223372036854775807 (strict mode).',
  );
  assert.equal(d.presented, 9007199254740993n);
  assert.equal(d.stored, 9223372036854775807n);
  assert.equal(d.mode, 'strict');
  assert.equal(d.key, '(a, b)=(x: presented token 1, y)');
});

test('parses all rows, a resource, a hidden stored token, and a missing token', () => {
  assert.equal(parseDetail('Relation public.t, all rows: presented token 5, stored token 7 (monotonic mode).').key, null);
  const r = parseDetail('Resource "order:1": presented token 5, stored token 7 (monotonic mode).');
  assert.equal(r.resource, 'order:1');
  assert.equal(r.relation, null);
  const hidden = parseDetail('Relation s.t, key (not visible): presented token 5, stored token (not visible) (monotonic mode).');
  assert.equal(hidden.key, null);
  assert.equal(hidden.stored, null);
  const m = parseDetail('Relation public.t, key (id)=(1): no token presented, stored token 7.');
  assert.deepEqual(m, { relation: 'public.t', key: '(id)=(1)', resource: null, presented: null, stored: 7n, mode: null });
  assert.equal(parseDetail('something else').stored, null);
  assert.equal(parseDetail(undefined).stored, null);
});

test('maps 23T01 and 23T02 with their fields, and leaves other errors alone', () => {
  const stale = mapError({
    message: 'stale fencing token 5 for relation "t"',
    code: '23T01',
    detail: 'Relation public.t, key (id)=(1): presented token 5, stored token 7 (monotonic mode).',
    schema: 'public',
    table: 't',
    column: 'last_fencing_token',
    constraint: 'fencing_stale_token',
  });
  assert.ok(stale instanceof StaleTokenError);
  assert.equal(stale.table, 't');
  assert.equal(stale.schema, 'public');
  assert.equal(stale.column, 'last_fencing_token');
  assert.equal(stale.constraint, 'fencing_stale_token');
  assert.equal(stale.presented, 5n);
  assert.equal(stale.stored, 7n);
  const missing = mapError({ message: 'missing', code: '23T02', detail: 'Relation public.t, all rows: no token presented, stored token 7.' });
  assert.ok(missing instanceof MissingTokenError);
  assert.equal(missing.presented, null);
  const other = { message: 'x', code: '23505' };
  assert.equal(mapError(other), other);
});

test('tokens as bigint, safe number or decimal string; nothing else', () => {
  assert.equal(tokenText(9007199254740993n), '9007199254740993');
  assert.equal(tokenText(42), '42');
  assert.equal(tokenText('0042'), '42');
  assert.throws(() => tokenText(2 ** 53 + 2), RangeError);
  assert.throws(() => tokenText(0), RangeError);
  assert.throws(() => tokenText(-1n), RangeError);
  assert.throws(() => tokenText('1e3'), RangeError);
});
