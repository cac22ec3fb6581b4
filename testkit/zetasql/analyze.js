// analyze.js feeds SQL scripts to Google's ZetaSQL analyzer, as packaged
// by @fivetrandevelopers/zetasql (a prebuilt local gRPC server and its
// Node client), with maximum language features.
//
// Usage: node analyze.js <node_modules dir> < request.json
//
// request.json: {"tables": [{"name": "p.d.t", "columns": [{"name": "a",
// "type": <type>}]}], "params": [{"name": "x", "type": <type>}],
// "scripts": [{"name": "commit.sql", "sql": "..."}]}, where <type> is
// "STRING", "INT64", "BOOL", "TIMESTAMP", "JSON", {"array": <type>} or
// {"struct": [{"name": "f", "type": <type>}]}.
//
// Each script is analyzed statement by statement (parse_resume_location).
// A CREATE TEMP TABLE ... AS SELECT adds its table, with the columns the
// analyzer resolved, to the catalog of the statements after it. Writes one
// JSON line per script: {"name": ..., "ok": true, "statements": n} or
// {"name": ..., "ok": false, "error": "...", "at": byte offset}.
'use strict';
const path = require('path');
const { start, read } = require('./server.js');

const modules = process.argv[2];
const z = require(path.join(modules, '@fivetrandevelopers/zetasql'));

const kinds = ['RESOLVED_QUERY_STMT', 'RESOLVED_MERGE_STMT', 'RESOLVED_BEGIN_STMT', 'RESOLVED_COMMIT_STMT',
  'RESOLVED_ASSERT_STMT', 'RESOLVED_CREATE_TABLE_AS_SELECT_STMT', 'RESOLVED_CREATE_VIEW_STMT',
  'RESOLVED_UPDATE_STMT', 'RESOLVED_DELETE_STMT', 'RESOLVED_INSERT_STMT'];

function typeProto(t) {
  if (typeof t === 'string') return { typeKind: 'TYPE_' + t };
  if (t.array) return { typeKind: 'TYPE_ARRAY', arrayType: { elementType: typeProto(t.array) } };
  if (t.struct) {
    return { typeKind: 'TYPE_STRUCT', structType: { field: t.struct.map(f => ({ fieldName: f.name, fieldType: typeProto(f.type) })) } };
  }
  throw new Error('unknown type ' + JSON.stringify(t));
}

// findColumns returns the column_definition_list of a resolved CREATE.
function findColumns(node) {
  if (!node || typeof node !== 'object') return null;
  if (Array.isArray(node.columnDefinitionList) && node.columnDefinitionList.length) return node.columnDefinitionList;
  for (const v of Object.values(node)) {
    const found = findColumns(v);
    if (found) return found;
  }
  return null;
}

async function main() {
  const req = JSON.parse(await read(process.stdin));
  const { client, stop } = await start(z, modules);
  try {
    const lo = (await new z.LanguageOptions().enableMaximumLanguageFeatures()).serialize();
    lo.supportedStatementKinds = kinds;
    const options = {
      languageOptions: lo,
      queryParameters: req.params.map(p => ({ name: p.name, type: typeProto(p.type) })),
      errorMessageMode: 'ERROR_MESSAGE_ONE_LINE',
    };
    const baseTables = req.tables.map(t => ({
      name: t.name,
      column: t.columns.map(c => ({ name: c.name, type: typeProto(c.type) })),
    }));
    for (const script of req.scripts) {
      const tables = baseTables.slice();
      let pos = 0, n = 0;
      const sql = script.sql;
      const out = { name: script.name, ok: true };
      while (Buffer.byteLength(sql) > pos && sql.slice(Buffer.from(sql).subarray(0, pos).toString().length).trim() !== '') {
        const catalog = { name: 'formsync', table: tables, builtinFunctionOptions: { languageOptions: lo } };
        let res;
        try {
          res = await client.analyze({
            options, simpleCatalog: catalog,
            parseResumeLocation: { input: sql, bytePosition: pos, allowResume: true },
          });
        } catch (e) {
          out.ok = false;
          out.error = e.details || e.message;
          out.at = pos;
          break;
        }
        n++;
        const stmt = res.resolvedStatement;
        const create = stmt && stmt.resolvedCreateStatementNode;
        if (create) {
          const cols = findColumns(create);
          const name = findName(create);
          if (cols && name) tables.push({ name, column: cols.map(c => ({ name: c.name, type: c.type })) });
        }
        pos = res.resumeBytePosition;
      }
      out.statements = n;
      process.stdout.write(JSON.stringify(out) + '\n');
    }
  } finally {
    stop();
  }
}

// findName returns the name path of a resolved CREATE, joined by dots.
function findName(node) {
  if (!node || typeof node !== 'object') return null;
  if (Array.isArray(node.namePath) && node.namePath.length) return node.namePath.join('.');
  for (const v of Object.values(node)) {
    const found = findName(v);
    if (found) return found;
  }
  return null;
}

main().then(() => process.exit(0), e => { process.stderr.write(String(e && e.stack || e) + '\n'); process.exit(2); });
