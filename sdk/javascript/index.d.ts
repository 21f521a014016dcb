// Types of wfhost-sdk for JavaScript (editors and `tsc --checkJs` read
// them; the SDK itself is plain JavaScript). Field names are the WIT's in
// camelCase, as the component bindings give them.

/** One piece of the execution payload. */
export interface ContextSegment {
  id: string;
  /** Semantic type, e.g. `SYSTEM_INSTRUCTION`, `CODE_OUTPUT`. */
  kind: string;
  content: string;
}

export type Payload = ContextSegment[];

/** The latest structured output of a block that ran earlier in the scope. */
export interface Artifact {
  /** `node.block`. */
  blockId: string;
  /** JSON text. */
  content: string;
}

/** The block a worker executes (the WIT `block-context`, with conveniences). */
export class BlockContext {
  readonly workflowId: string;
  readonly executionId: string;
  readonly nodeId: string;
  readonly blockId: string;
  /** 0-based index of this step in the run. */
  readonly stepIndex: number;
  /** 1 on the block's first execution in this run. */
  readonly attempt: number;
  /** `node.block` of the previous step, if any. */
  readonly previousBlockId: string | undefined;
  /** Globs of the paths the block may modify; undefined: unrestricted. */
  readonly fileRestrictions: string[] | undefined;
  /** `/workspace`. */
  readonly workspaceDir: string;
  readonly systemPrompt: string;
  /** The five context layers rendered as one document. */
  readonly assembledContext: string;
  readonly artifacts: Artifact[];
  /** The raw JSON texts behind config(), inputs(), staticMemory(), inheritedMemory(). */
  readonly configText: string;
  readonly inputsText: string;
  readonly staticMemoryText: string;
  readonly inheritedMemoryText: string;
  constructor(wire: WireBlockContext);
  /** The block's `config` (null when unset); with `keys`, an unknown key throws `bad-config`. */
  config<T = any>(options?: { keys?: string[] }): T;
  /** The run's inputs (`{}` when none); throws `bad-inputs`. */
  inputs<T = Record<string, any>>(): T;
  staticMemory<T = Record<string, any>>(): T;
  inheritedMemory<T = Record<string, any>>(): T;
  /** The parsed structured output of `blockId` (`node.block`), if it ran. */
  artifact<T = any>(blockId: string): T | undefined;
}

/** A read-only view of the run, for action handlers. */
export class RunView {
  readonly workflowId: string;
  readonly executionId: string;
  readonly nodeId: string;
  readonly blockId: string;
  /** The signal that selected the transition. */
  readonly signal: string;
  readonly stepIndex: number;
  /** Return addresses, innermost last, as `node.block`. */
  readonly returnStack: string[];
  constructor(wire: WireRunView);
}

/** A failure the plugin reports: the host fails the block with `code: message`. */
export class PluginError extends Error {
  readonly code: string;
  readonly detail: string;
  constructor(code: string, message: string);
  toWire(): { code: string; message: string };
}

export interface Output {
  payload: Payload;
  signal: string;
  /** An object (serialized to JSON) or JSON text; validated against the block's schema. */
  structuredOutput?: unknown;
  statistics: { tokensUsed: number; linesWritten: number };
}

/** A new segment with a generated id `<kind>-<n>`. */
export function segment(kind: string, content: string): ContextSegment;
/** A worker's output. */
export function output(
  payload: Payload,
  signal: string,
  extra?: { structuredOutput?: unknown; tokensUsed?: number; linesWritten?: number },
): Output;

export interface BlockRef {
  node: string | undefined;
  block: string;
}
/** `block` or `node.block`. */
export function blockRef(target: string): BlockRef;

export type EngineCommandValue =
  | { tag: "jump"; val: BlockRef }
  | { tag: "call"; val: { node: string; returnTo: BlockRef | undefined } }
  | { tag: "return" }
  | { tag: "end" }
  | { tag: "fail"; val: string }
  | { tag: "gate"; val: string };

export const EngineCommand: {
  jump(target: string): EngineCommandValue;
  call(node: string, returnTo?: string): EngineCommandValue;
  return(): EngineCommandValue;
  end(): EngineCommandValue;
  fail(reason: string): EngineCommandValue;
  gate(prompt: string): EngineCommandValue;
};

export const env: {
  secretRef(name: string): string;
  hostRef(name: string): string;
  toWire(value: string | { secret: string }): string;
};

export type Level = "trace" | "debug" | "info" | "warn" | "error";
export const log: Readonly<Record<Level, (message: string) => void>>;

/** The WIT records as the component bindings give them (u64 as bigint). */
export interface WireBlockContext {
  workflowId: string;
  executionId: string;
  nodeId: string;
  blockId: string;
  stepIndex: bigint;
  attempt: number;
  previousBlockId?: string;
  staticMemory: string;
  inheritedMemory: string;
  artifacts: Artifact[];
  config: string;
  inputs: string;
  fileRestrictions?: string[];
  workspaceDir: string;
  systemPrompt: string;
  assembledContext: string;
}
export interface WireRunView {
  workflowId: string;
  executionId: string;
  nodeId: string;
  blockId: string;
  signal: string;
  stepIndex: bigint;
  returnStack: string[];
}
export interface WireWorkerOutput {
  payload: Payload;
  signal: string;
  structuredOutput?: string;
  statistics: { tokensUsed: bigint; linesWritten: bigint };
}

export interface Worker {
  readonly signals: readonly string[] | undefined;
  run(context: WireBlockContext, payload: Payload): WireWorkerOutput;
}
export interface ActionHandler {
  interpret(action: string, run: WireRunView): EngineCommandValue;
}

/** A block worker; export it as `blockWorker`. */
export function defineWorker(spec: {
  run(ctx: BlockContext, payload: Payload): Output;
  /** The signals `run` can return (`config:KEY`: the config's `KEY`). */
  signals?: string[];
}): Worker;
/** An action handler; export it as `actionInterpreter`. */
export function defineActionHandler(spec: {
  interpret(action: string, run: RunView): EngineCommandValue;
}): ActionHandler;

/** A WIT command: argv, never a shell string. */
export interface Command {
  argv: string[];
  cwd?: string;
  env: Array<[string, string]>;
}
export interface ContainerOptions {
  image: string;
  cpus?: number;
  memoryMb?: bigint;
}
/**
 * Host capabilities; each needs the capability in wfhost-plugin.toml's
 * `capabilities` and the workflow's `grants`. Records are the WIT's in
 * camelCase; an `err` result is thrown (its value in the error's `payload`).
 */
export const exec: { run(block: { commands: Command[]; allowShell: boolean; executor?: object }): any };
export const container: {
  run(options: ContainerOptions, command: Command, allowShell: boolean): string;
  status(id: string): any;
  logs(id: string): [string, string];
  pause(id: string): void;
  unpause(id: string): void;
  remove(id: string): void;
};
export const slurm: {
  submit(commands: Command[], allowShell: boolean, options: object): string;
  status(jobId: string): any;
  cancel(jobId: string): void;
};
export const agent: { run(invocation: object): any };

/** Connect host interfaces (the component's entry does; tests connect fakes). Returns a restore function. */
export function connectHost(interfaces: {
  log?: (level: Level, message: string) => void;
  exec?: object;
  container?: object;
  slurm?: object;
  agent?: object;
}): () => void;

export function testContext(blockId: string, config?: unknown, overrides?: Partial<WireBlockContext>): WireBlockContext;
export function testRunView(overrides?: Partial<WireRunView>): WireRunView;
/** Call a worker as the host does; throws a PluginError for an `err`. */
export function callWorker(worker: Worker, context: WireBlockContext, payload?: Payload): WireWorkerOutput;
export function callActionHandler(handler: ActionHandler, action: string, run?: WireRunView): EngineCommandValue;
/** Record log lines as `[level] message`. */
export function recordLog(): { lines: string[]; restore(): void };
