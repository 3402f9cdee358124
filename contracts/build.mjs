#!/usr/bin/env node
// Compile the project's contracts and the vendored stablecoins with pinned solcjs releases, and write one
// artifact per deployable contract:
//
//   contracts/src/*.sol                 solc 0.8.28  -> contracts/artifacts/<Contract>.json (shipped)
//   contracts/vendor/circle (USDC)      solc 0.6.12  -> contracts/vendor/artifacts/<Contract>.json (tests)
//   contracts/vendor/tether (USDT)      solc 0.4.18  -> contracts/vendor/artifacts/<Contract>.json (tests)
//
//   node contracts/build.mjs           write the artifacts (and delete stale ones)
//   node contracts/build.mjs --check   compile in memory; exit 1 if committed artifacts differ
//
// The output is deterministic (sorted sources, fixed settings), so the committed artifacts can be
// checked against the sources in CI. The vendored sources are the upstream files unchanged
// (contracts/vendor/README.md says where each comes from); each is built with the compiler version and
// optimizer settings its publisher used.
import { createRequire } from "node:module";
import { existsSync, mkdirSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const CONTRACTS_DIR = dirname(fileURLToPath(import.meta.url));
const VENDOR_DIR = join(CONTRACTS_DIR, "vendor");

const BUILDS = [
  {
    name: "project",
    solc: "solc",
    root: CONTRACTS_DIR,
    // Source unit names are "src/<file>" so relative imports ("./X.sol") resolve inside the input.
    sources: readdirSync(join(CONTRACTS_DIR, "src")).filter((f) => f.endsWith(".sol")).sort()
      .map((f) => `src/${f}`),
    contracts: null, // every concrete contract
    artifacts: join(CONTRACTS_DIR, "artifacts"),
    settings: {
      optimizer: { enabled: true, runs: 200 },
      evmVersion: "cancun",
      // "none" keeps the source-metadata IPFS hash out of the bytecode, so comments don't change it.
      metadata: { bytecodeHash: "none" },
    },
  },
  {
    name: "circle",
    solc: "solc-0.6.12",
    root: join(VENDOR_DIR, "circle"),
    sources: ["contracts/v1/FiatTokenProxy.sol", "contracts/v2/FiatTokenV2_2.sol"],
    // FiatTokenV2_2 calls the external library SignatureChecker, deployed on its own and linked (as on
    // mainnet): the artifact keeps solc's link references, filled in at deployment.
    contracts: ["FiatTokenProxy", "FiatTokenV2_2", "SignatureChecker"],
    artifacts: join(VENDOR_DIR, "artifacts"),
    // circlefin/stablecoin-evm hardhat.config.ts: 0.6.12, optimizer on with 10,000,000 runs.
    settings: { optimizer: { enabled: true, runs: 10000000 } },
  },
  {
    name: "tether",
    solc: "solc-0.4.18",
    root: join(VENDOR_DIR, "tether"),
    sources: ["TetherToken.sol"],
    contracts: ["TetherToken"],
    artifacts: join(VENDOR_DIR, "artifacts"),
    // Tether's mainnet token was compiled with 0.4.18; we build it without the optimizer.
    settings: { optimizer: { enabled: false, runs: 200 } },
  },
];

function compilerInput(build) {
  const sources = Object.fromEntries(
    build.sources.map((unit) => [unit, { content: readFileSync(join(build.root, unit), "utf8") }]),
  );
  return {
    language: "Solidity",
    sources,
    settings: {
      ...build.settings,
      outputSelection: {
        "*": {
          "*": ["abi", "evm.bytecode.object", "evm.bytecode.linkReferences", "evm.deployedBytecode.object"],
          "": ["ast"],
        },
      },
    },
  };
}

// Imports of the vendored sources ("../v1/X.sol", "@openzeppelin/...") resolve inside the build's root.
function importer(build) {
  return (path) => {
    const file = join(build.root, normalize(path));
    if (!file.startsWith(build.root) || !existsSync(file)) return { error: `not found: ${path}` };
    return { contents: readFileSync(file, "utf8") };
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

function runCompiler(solc, input, findImports) {
  const text = JSON.stringify(input);
  // solcjs before 0.5 names the standard-JSON entry point compileStandardWrapper.
  const output = solc.compileStandardWrapper
    ? solc.compileStandardWrapper(text, findImports)
    : solc.compile(text, { import: findImports });
  return JSON.parse(output);
}

/** Adds to `artifacts` (Map<path, text>) what one build produces. */
function compile(build, artifacts) {
  const solc = require(build.solc);
  const output = runCompiler(solc, compilerInput(build), importer(build));
  const problems = output.errors ?? [];
  for (const p of problems) {
    if (p.severity === "error") process.stderr.write(p.formattedMessage ?? `error: ${p.message}\n`);
  }
  if (problems.some((p) => p.severity === "error")) throw new Error(`compilation of ${build.name} failed`);
  const wanted = build.contracts ? new Set(build.contracts) : null;
  for (const [unit, contracts] of Object.entries(output.contracts ?? {})) {
    const deployable = wanted ?? concreteContractNames(output.sources[unit].ast);
    for (const [name, c] of Object.entries(contracts)) {
      const bytecode = c.evm.bytecode.object;
      if (!deployable.has(name) || bytecode.length === 0) continue;
      const links = c.evm.bytecode.linkReferences ?? {};
      if (bytecode.includes("__") && (build.contracts === null || Object.keys(links).length === 0)) {
        throw new Error(`${name} needs library linking, which is unsupported here`);
      }
      const path = join(build.artifacts, `${name}.json`);
      if (artifacts.has(path)) throw new Error(`two contracts are named ${name}`);
      const artifact = {
        contractName: name,
        abi: c.abi,
        bytecode: `0x${bytecode}`,
        deployedBytecode: `0x${c.evm.deployedBytecode.object}`,
        compiler: solc.version(),
      };
      if (Object.keys(links).length > 0) artifact.linkReferences = links;
      artifacts.set(path, `${JSON.stringify(artifact, null, 2)}\n`);
    }
  }
  for (const name of wanted ?? []) {
    if (!artifacts.has(join(build.artifacts, `${name}.json`))) throw new Error(`${name} was not compiled`);
  }
}

function freshArtifacts() {
  const artifacts = new Map();
  for (const build of BUILDS) compile(build, artifacts);
  return artifacts;
}

function committedArtifacts() {
  const dirs = [...new Set(BUILDS.map((b) => b.artifacts))];
  return dirs.flatMap((dir) =>
    existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".json")).sort().map((f) => join(dir, f)) : [],
  );
}

function shown(path) {
  return path.slice(CONTRACTS_DIR.length - "contracts".length);
}

function check(fresh) {
  const problems = [];
  for (const [path, text] of fresh) {
    if (!existsSync(path)) problems.push(`missing: ${shown(path)}`);
    else if (readFileSync(path, "utf8") !== text) problems.push(`differs: ${shown(path)}`);
  }
  for (const path of committedArtifacts()) {
    if (!fresh.has(path)) problems.push(`extra (no such contract): ${shown(path)}`);
  }
  if (problems.length > 0) {
    for (const p of problems) console.error(p);
    console.error("artifacts are out of date: run `node contracts/build.mjs`");
    return 1;
  }
  const compilers = BUILDS.map((b) => `${b.name}: solc ${require(b.solc).version()}`).join(", ");
  console.log(`artifacts up to date (${fresh.size} contracts; ${compilers})`);
  return 0;
}

function write(fresh) {
  for (const path of committedArtifacts()) {
    if (!fresh.has(path)) {
      unlinkSync(path);
      console.log(`removed stale ${shown(path)}`);
    }
  }
  for (const [path, text] of fresh) {
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, text);
    console.log(`wrote ${shown(path)}`);
  }
  return 0;
}

function main(argv) {
  const unknown = argv.filter((a) => a !== "--check");
  if (unknown.length > 0) {
    console.error(`usage: node contracts/build.mjs [--check]  (unknown: ${unknown.join(" ")})`);
    return 2;
  }
  const fresh = freshArtifacts();
  return argv.includes("--check") ? check(fresh) : write(fresh);
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  console.error(`build failed: ${err.message}`);
  process.exitCode = 1;
}
