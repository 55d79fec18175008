import { h, svg } from '../dom.ts';

export interface Series {
  title: string;
  /** Samples as [unix ms, value]. */
  points: Array<[number, number]>;
  /** The top of the y axis (e.g. 100 for percent, the total for memory). */
  max: number;
  format: (value: number) => string;
}

const WIDTH = 320;
const HEIGHT = 120;
const PAD = 4;

/** A small line chart as inline SVG, with the latest value and the range in words for screen readers. */
export function lineChart(series: Series): HTMLElement {
  const { points, max, format, title } = series;
  const latest = points.length > 0 ? points[points.length - 1][1] : undefined;
  const caption = latest === undefined ? `${title}: no samples yet` : `${title}: ${format(latest)} of ${format(max)}`;
  const chart = svg('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': caption, preserveAspectRatio: 'none', class: 'chart-svg' });
  for (const fraction of [0.25, 0.5, 0.75]) {
    const y = PAD + (HEIGHT - 2 * PAD) * fraction;
    chart.appendChild(svg('line', { x1: 0, x2: WIDTH, y1: y, y2: y, class: 'chart-grid' }));
  }
  if (points.length > 0) {
    const t0 = points[0][0];
    const span = Math.max(1, points[points.length - 1][0] - t0);
    const top = max > 0 ? max : Math.max(1, ...points.map(([, v]) => v));
    const xy = points.map(([t, v]) => {
      const x = points.length === 1 ? WIDTH : ((t - t0) / span) * WIDTH;
      const y = HEIGHT - PAD - (Math.min(v, top) / top) * (HEIGHT - 2 * PAD);
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    chart.appendChild(svg('polygon', { points: `0,${HEIGHT} ${xy.join(' ')} ${WIDTH},${HEIGHT}`, class: 'chart-area' }));
    chart.appendChild(svg('polyline', { points: xy.join(' '), class: 'chart-line' }));
  }
  return h('figure', { class: 'chart' }, h('figcaption', {}, caption), chart as unknown as Node);
}
