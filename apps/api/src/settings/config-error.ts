/** A setting the process was started with is wrong: the start stops with its message, which names the variable. */
export class ConfigError extends Error {}
