/* global console, process */
// Sums the vitest JSON reports of a CI run into the closing line "N passed, N failed, N skipped".
// A skip is expected in one place only: the PGlite run, for a test whose full name says it needs
// PostgreSQL (the word PostgreSQL in a describe or test title: a second connection, a server that can be
// stopped). Any other skip — a PostgreSQL-only test skipped on PostgreSQL because a binary was
// missing, a `.skip` left behind — is listed and counted as a failure. A run without a report failed.
//   node .ci/summary.mjs <folder of reports> <run name>...
import { existsSync, readFileSync } from 'node:fs';

const [folder, ...runs] = process.argv.slice(2);
let passed = 0;
let failed = 0;
let skipped = 0;
const unexpected = [];
// Failed tests are listed again at the end, with the first line of their message: only the tail of
// a long CI log may be kept, and it should still say what failed.
const failures = [];
const where = (suite) => suite.name.replace(/^.*\/test\//, 'test/');
for (const run of runs) {
  const file = `${folder}/${run}.json`;
  if (!existsSync(file)) {
    console.log(`no report from the ${run} run`);
    failed += 1;
    continue;
  }
  const report = JSON.parse(readFileSync(file, 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests + (report.numFailedTestSuites > 0 && report.numTotalTests === 0 ? report.numFailedTestSuites : 0);
  for (const suite of report.testResults) {
    if (suite.status === 'failed' && suite.assertionResults.length === 0) failures.push(`${run}: ${where(suite)}: ${firstLine(suite.message)}`);
    for (const test of suite.assertionResults) {
      const fullName = [...test.ancestorTitles, test.title].join(' › ');
      if (test.status === 'failed') failures.push(`${run}: ${fullName} (${where(suite)}): ${firstLine(test.failureMessages?.[0])}`);
      if (test.status !== 'skipped' && test.status !== 'pending' && test.status !== 'todo') continue;
      skipped += 1;
      if (!(run === 'pglite' && fullName.includes('PostgreSQL'))) unexpected.push(`${run}: ${fullName} (${where(suite)})`);
    }
  }
}
if (failures.length > 0) console.log(`failed tests:\n  ${failures.join('\n  ')}`);
if (unexpected.length > 0) {
  console.log(`unexpected skips (each counts as a failure):\n  ${unexpected.join('\n  ')}`);
  failed += unexpected.length;
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);

function firstLine(message) {
  return String(message ?? '').split('\n').find((line) => line.trim() !== '')?.trim().slice(0, 300) ?? '';
}
