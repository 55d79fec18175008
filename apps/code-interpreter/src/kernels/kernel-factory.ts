import type { Logger } from 'pino';
import { assetPath, type ServerConfig } from '../config.ts';
import type { KernelFactory } from '../contexts/context-registry.ts';
import type { Language } from '../contexts/languages.ts';
import { BashKernel } from './bash-kernel.ts';
import { JsKernel } from './js-kernel.ts';
import type { Kernel } from './kernel.ts';
import { PythonKernel } from './python-kernel.ts';

/** The kernel of each language, configured from the server's settings. */
export function kernelFactory(config: ServerConfig): KernelFactory {
  return (language: Language, cwd: string, logger: Logger): Kernel => {
    switch (language) {
      case 'python':
        return new PythonKernel({
          python: config.python,
          bridgePath: assetPath(config, 'kernel_bridge.py'),
          setupPath: assetPath(config, 'kernel_setup.py'),
          cwd,
          maxTextChars: config.maxOutputBytes,
          startTimeoutMs: config.kernelStartTimeoutMs,
          interruptGraceMs: config.interruptGraceMs,
          logger,
        });
      case 'javascript':
      case 'typescript':
        return new JsKernel({
          language,
          workerPath: assetPath(config, 'js-worker.mjs'),
          cwd,
          startTimeoutMs: config.kernelStartTimeoutMs,
          interruptGraceMs: config.interruptGraceMs,
          logger,
        });
      case 'bash':
        return new BashKernel({ bash: config.bash, cwd, logger });
    }
  };
}
