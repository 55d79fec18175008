import type { Page } from 'puppeteer-core';

/**
 * Clicks `selector` in `page` once it is there, found and clicked in one step inside the page: the dashboard's views
 * re-render when their data refreshes, and an element found first and clicked after could be detached in between
 * ("Node is detached", "not clickable").
 */
export async function clickWhenPresent(page: Page, selector: string, timeout = 15_000): Promise<void> {
  await page.waitForFunction(
    (sel: string) => {
      const el = document.querySelector<HTMLElement>(sel);
      if (!el) return false;
      el.click();
      return true;
    },
    { timeout, polling: 100 },
    selector,
  );
}
