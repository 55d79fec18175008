/** Steps as the build log shows them: `[3/20] RUN apt-get install -y git`. */
import type { BuildStep } from '../template-model.ts';

const MAX_TEXT = 300;

function clip(text: string): string {
  const oneLine = text.replace(/\s*\n\s*/g, ' ');
  return oneLine.length > MAX_TEXT ? `${oneLine.slice(0, MAX_TEXT - 1)}…` : oneLine;
}

/** `RUN echo hi (as root)`, `COPY app /app`, `ENV A=1 B=2`, … */
export function stepText(step: BuildStep): string {
  const [first = '', second = '', third = '', fourth = ''] = step.args;
  switch (step.type) {
    case 'RUN':
      return clip(`RUN ${first}${second ? ` (as ${second})` : ''}`);
    case 'COPY': {
      const options = [third ? `--chown=${third}` : '', fourth ? `--chmod=${fourth}` : ''].filter(Boolean).join(' ');
      return clip(`COPY ${options ? `${options} ` : ''}${first} ${second}`);
    }
    case 'ENV': {
      const pairs: string[] = [];
      for (let i = 0; i + 1 < step.args.length; i += 2) pairs.push(`${step.args[i]}=${step.args[i + 1]}`);
      return clip(`ENV ${pairs.join(' ')}`);
    }
    case 'WORKDIR':
    case 'USER':
      return clip(`${step.type} ${first}`);
  }
}

export function stepLabel(index: number, total: number, step: BuildStep): string {
  return `[${index + 1}/${total}] ${stepText(step)}`;
}

/** A command shortened for error messages. */
export function shortCommand(command: string): string {
  return clip(command);
}
