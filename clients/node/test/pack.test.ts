import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

test('npm pack: builds dist/ and ships the code, the declarations, README and LICENSE, not the worker', () => {
  const run = spawnSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], {
    cwd: join(__dirname, '..', '..'),
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.status, 0, run.stderr);
  const [pack] = JSON.parse(run.stdout.slice(run.stdout.indexOf('[')));
  const files: string[] = pack.files.map((f: { path: string }) => f.path);
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/lease.d.ts', 'README.md', 'LICENSE', 'package.json'])
    assert.ok(files.includes(f), `${f} in ${files.join(' ')}`);
  assert.ok(!files.some((f) => f.includes('conformance') || f.startsWith('src/') || f.startsWith('test/')), files.join(' '));
});
