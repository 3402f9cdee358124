#!/usr/bin/env node
// Compile contracts/src/*.sol with the pinned solcjs and write contracts/artifacts/<Contract>.json.
//
//   node contracts/build.mjs           write the artifacts (and delete stale ones)
//   node contracts/build.mjs --check   compile in memory; exit 1 if committed artifacts differ
//
// The output is deterministic (sorted sources, fixed settings, no metadata hash in the bytecode), so the
// committed artifacts can be checked against the sources in CI.
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import solc from "solc";

const CONTRACTS_DIR = dirname(fileURLToPath(import.meta.url));
const SRC_DIR = join(CONTRACTS_DIR, "src");
const ARTIFACTS_DIR = join(CONTRACTS_DIR, "artifacts");

function compilerInput() {
  const files = readdirSync(SRC_DIR).filter((f) => f.endsWith(".sol")).sort();
  if (files.length === 0) throw new Error(`no .sol files in ${SRC_DIR}`);
  // Source unit names are "src/<file>" so relative imports ("./X.sol") resolve inside the input.
  const sources = Object.fromEntries(
    files.map((f) => [`src/${f}`, { content: readFileSync(join(SRC_DIR, f), "utf8") }]),
  );
  return {
    language: "Solidity",
    sources,
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
      // "none" keeps the source-metadata IPFS hash out of the bytecode, so comments don't change it.
      metadata: { bytecodeHash: "none" },
      outputSelection: {
        "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"], "": ["ast"] },
      },
    },
  };
}

// Only concrete contracts are deployable; libraries have bytecode too but are never deployed by us.
function concreteContractNames(ast) {
  return new Set(
    ast.nodes
      .filter((n) => n.nodeType === "ContractDefinition" && n.contractKind === "contract" && !n.abstract)
      .map((n) => n.name),
  );
}

/** Returns Map<fileName, fileText> of the artifacts a fresh compile produces. */
function compile() {
  const output = JSON.parse(solc.compile(JSON.stringify(compilerInput())));
  const problems = output.errors ?? [];
  for (const p of problems) process.stderr.write(p.formattedMessage ?? `${p.severity}: ${p.message}\n`);
  if (problems.some((p) => p.severity === "error")) {
    throw new Error("compilation failed");
  }
  const artifacts = new Map();
  for (const [unit, contracts] of Object.entries(output.contracts ?? {})) {
    const deployable = concreteContractNames(output.sources[unit].ast);
    for (const [name, c] of Object.entries(contracts)) {
      const bytecode = c.evm.bytecode.object;
      if (!deployable.has(name) || bytecode.length === 0) continue;
      if (bytecode.includes("__$")) throw new Error(`${name} needs library linking, which is unsupported`);
      const fileName = `${name}.json`;
      if (artifacts.has(fileName)) throw new Error(`two contracts are named ${name}`);
      const artifact = {
        contractName: name,
        abi: c.abi,
        bytecode: `0x${bytecode}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
        compiler: solc.version(),
      };
      artifacts.set(fileName, `${JSON.stringify(artifact, null, 2)}\n`);
    }
  }
  return artifacts;
}

function committedArtifactNames() {
  if (!existsSync(ARTIFACTS_DIR)) return [];
  return readdirSync(ARTIFACTS_DIR).filter((f) => f.endsWith(".json")).sort();
}

function check(fresh) {
  const problems = [];
  for (const [fileName, text] of fresh) {
    const path = join(ARTIFACTS_DIR, fileName);
    if (!existsSync(path)) problems.push(`missing: contracts/artifacts/${fileName}`);
    else if (readFileSync(path, "utf8") !== text) problems.push(`differs: contracts/artifacts/${fileName}`);
  }
  for (const fileName of committedArtifactNames()) {
    if (!fresh.has(fileName)) problems.push(`extra (no such contract): contracts/artifacts/${fileName}`);
  }
  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    console.error("artifacts are out of date: run `node contracts/build.mjs`");
    return 1;
  }
  console.log(`artifacts up to date (${fresh.size} contracts, solc ${solc.version()})`);
  return 0;
}

function write(fresh) {
  mkdirSync(ARTIFACTS_DIR, { recursive: true });
  for (const fileName of committedArtifactNames()) {
    if (!fresh.has(fileName)) {
      unlinkSync(join(ARTIFACTS_DIR, fileName));
      console.log(`removed stale contracts/artifacts/${fileName}`);
    }
  }
  for (const [fileName, text] of fresh) {
    writeFileSync(join(ARTIFACTS_DIR, fileName), text);
    console.log(`wrote contracts/artifacts/${fileName}`);
  }
  return 0;
}

function main(argv) {
  const unknown = argv.filter((a) => a !== "--check");
  if (unknown.length > 0) {
    console.error(`usage: node contracts/build.mjs [--check]  (unknown: ${unknown.join(" ")})`);
    return 2;
  }
  const fresh = compile();
  return argv.includes("--check") ? check(fresh) : write(fresh);
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  console.error(`build failed: ${err.message}`);
  process.exitCode = 1;
}
