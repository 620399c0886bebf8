// node-postgres against a stale (23T01) and an unfenced (23T02) write: the
// class of the error and the SQLSTATE, constraint, column, table and schema
// it carries.  Prints "test drivers_node_postgres ... ok|FAILED".  The
// database (PG* environment) is the one test/drivers/run prepares.
const { Client, DatabaseError } = require('pg');

const cases = {
  '23T01': ["SELECT set_config('fencing.token', '4', true)",
            "UPDATE shop.orders SET status = 'late' WHERE id = 'order:1'"],
  '23T02': ["UPDATE shop.orders SET status = 'late' WHERE id = 'order:1'"],
};
const constraint = { '23T01': 'fencing_stale_token', '23T02': 'fencing_missing_token' };

async function main() {
  const client = new Client();
  await client.connect();
  const failures = [];
  try {
    for (const [state, statements] of Object.entries(cases)) {
      let seen = 'no error';
      try {
        await client.query('BEGIN');
        for (const statement of statements) await client.query(statement);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        seen = [err instanceof DatabaseError ? 'DatabaseError' : err.constructor.name,
                err.code, err.constraint, err.column, err.table, err.schema].join(' ');
      }
      const want = ['DatabaseError', state, constraint[state], 'epoch', 'orders', 'shop'].join(' ');
      if (seen !== want) failures.push(`  ${state}: got ${seen}, want ${want}`);
    }
    await client.query('SELECT 1');
  } finally {
    await client.end();
  }
  console.log(`test drivers_node_postgres ... ${failures.length ? 'FAILED' : 'ok'}`);
  failures.forEach((f) => console.log(f));
  return failures.length ? 1 : 0;
}

main().then((code) => process.exit(code), (err) => {
  console.log('test drivers_node_postgres ... FAILED');
  console.error(err);
  process.exit(1);
});
