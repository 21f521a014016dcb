// The host's interfaces, as the component's entry connects them (the
// `wfhost:plugin/*` imports) or as a test connects fakes of them.
//
// Plugin code never imports `wfhost:plugin/...` itself: those modules exist
// only inside the component. It calls `log`, `exec`, `container`, `slurm`
// and `agent` from this SDK, which forward to what is connected here, so
// the same code runs under `node --test`.

/** Natively (tests), log lines go to stderr. */
function stderrLog(level, message) {
  process.stderr.write(`[${level}] ${message}\n`);
}

const connected = { log: stderrLog };

/**
 * Connect host interfaces: `{ log, exec, container, slurm, agent }`, each
 * optional. `wfhost plugin build` connects the imports of the component;
 * tests connect fakes (e.g. `connectHost({ exec: { run: (block) => ... } })`).
 * Returns a function that restores what was connected before.
 */
export function connectHost(interfaces) {
  const before = { ...connected };
  for (const [name, value] of Object.entries(interfaces)) {
    if (!["log", "exec", "container", "slurm", "agent"].includes(name)) {
      throw new TypeError(`connectHost: \`${name}\` is not a host interface (log, exec, container, slurm, agent)`);
    }
    connected[name] = value;
  }
  return () => {
    for (const key of Object.keys(connected)) delete connected[key];
    Object.assign(connected, before);
  };
}

/** The connected log function. */
export function hostLog(level, message) {
  connected.log(level, message);
}

/**
 * A capability's interface: its functions forward to what is connected,
 * and say what is missing when nothing is.
 */
function capability(name, functions) {
  const proxy = {};
  for (const fn of functions) {
    proxy[fn] = (...args) => {
      const iface = connected[name];
      if (!iface || typeof iface[fn] !== "function") {
        throw new Error(
          `the \`${name}\` capability is not connected: list "${name}" in wfhost-plugin.toml's ` +
            `\`capabilities\` (and grant it in the workflow), or connect a fake in tests ` +
            `(connectHost({ ${name}: { ${fn}() { ... } } }))`,
        );
      }
      return iface[fn](...args);
    };
  }
  return Object.freeze(proxy);
}

/** `wfhost:plugin/exec`: run an exec block (`run(block)`). Needs the `exec` capability. */
export const exec = capability("exec", ["run"]);
/** `wfhost:plugin/container`: Docker containers of this run. Needs `container`. */
export const container = capability("container", ["run", "status", "logs", "pause", "unpause", "remove"]);
/** `wfhost:plugin/slurm`: Slurm jobs of this run. Needs `slurm`. */
export const slurm = capability("slurm", ["submit", "status", "cancel"]);
/** `wfhost:plugin/agent`: run an agent CLI for this block. Needs `agent`. */
export const agent = capability("agent", ["run"]);
