// Opens an odp report in Debian's chromium (headless, from file://) and prints what a test asserts on, as one
// JSON object: every request the page made, console errors and page errors, each chart's drawn elements, each
// sortable table's keys after one and two clicks on every header, the rows a filter leaves, the hover
// readout, the embedded data, and the time to the load event. tests/lua/report_test.lua runs it.
//   node tests/browser/check.js PAGE.html [SCREENSHOT.png] [FILTER_TEXT]
//   node tests/browser/check.js --render PAGE.html      only load it: requests, errors, time to the load event
// (bench/report_bench.lua)
"use strict";
const puppeteer = require("puppeteer-core");
const path = require("path");

async function main() {
  const args = process.argv.slice(2);
  const render_only = args[0] === "--render";
  if (render_only) args.shift();
  const [page_path, shot, filter_text] = args;
  const url = "file://" + path.resolve(page_path);
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // root in CI: chromium refuses its sandbox as root
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"],
  });
  const out = { url, requests: [], console_errors: [], page_errors: [] };
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1200, height: 900 });
    await page.setRequestInterception(true);
    page.on("request", (req) => {
      out.requests.push(req.url());
      // the page itself and nothing else; anything more is recorded above and refused here
      if (req.url() === url) req.continue(); else req.abort();
    });
    page.on("console", (m) => { if (m.type() === "error") out.console_errors.push(m.text()); });
    page.on("pageerror", (e) => out.page_errors.push(String(e)));
    const t0 = Date.now();
    await page.goto(url, { waitUntil: "load" });
    out.load_ms = Date.now() - t0;
    out.nav_ms = await page.evaluate(() => {
      const n = performance.getEntriesByType("navigation")[0];
      return n ? n.loadEventEnd - n.startTime : null;
    });
    if (!render_only) await interact(page, out, shot, filter_text);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}

// What the tests look at beyond loading: charts, sorting, filtering, hovering, the screenshot.
// What a reader without JavaScript gets: tables, their rows, charts and their text alternatives.
const contents = () => ({
  tables: document.querySelectorAll("table").length, rows: document.querySelectorAll("tbody tr").length,
  charts: document.querySelectorAll("figure svg").length, captions: document.querySelectorAll("figcaption").length,
  text: document.body.innerText.length,
});

async function interact(page, out, shot, filter_text) {
  out.contents = await page.evaluate(contents);
  const bare = await page.browser().newPage();
  await bare.setJavaScriptEnabled(false);
  await bare.goto(out.url, { waitUntil: "load" });
  out.contents_without_js = await bare.evaluate(contents);
  await bare.close();
  out.data = await page.evaluate(() => window.odpReport || null);
  out.charts = await page.evaluate(() => Array.from(document.querySelectorAll("figure[data-chart]")).map((f) => {
    const svg = f.querySelector("svg");
    const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
    return {
      id: f.id, data_points: Number(f.getAttribute("data-points")),
      points: f.querySelectorAll("svg circle.point").length, bars: f.querySelectorAll("svg rect.bar").length,
      lines: f.querySelectorAll("svg path.line").length, bands: f.querySelectorAll("svg path.band").length,
      width: box.width, height: box.height, label: svg ? svg.getAttribute("aria-labelledby") : null,
      caption: (f.querySelector("figcaption") || {}).textContent || "",
      // geometry in the SVG's own units: the plot area (the x axis' ends), where each band and mark label is
      // drawn, and the largest drawn point (its outline included)
      plot: (() => {
        const ax = svg && svg.querySelector("g.axes line");
        return ax ? { left: Number(ax.getAttribute("x1")), right: Number(ax.getAttribute("x2")) } : null;
      })(),
      labels: svg ? Array.from(svg.querySelectorAll("g.band text, g.mark text")).map((t) => {
        const b = t.getBBox();
        return { text: t.textContent, x: b.x, right: b.x + b.width, y: b.y, bottom: b.y + b.height };
      }) : [],
      // drawn points wider than 3.5 px, their outline included
      wide_points: svg ? Array.from(svg.querySelectorAll("circle.point")).filter((c) => {
        const r = c.getBoundingClientRect(), st = getComputedStyle(c);
        return Math.max(r.width, r.height) + (st.stroke === "none" ? 0 : parseFloat(st.strokeWidth)) > 3.5;
      }).length : 0,
    };
  }));
  // every header of every sortable table: the cells' keys (data-v, else the text) after one click, two clicks
  out.tables = {};
  const ids = await page.evaluate(() => Array.from(document.querySelectorAll("table.sortable")).map((t) => t.id));
  for (const id of ids) {
    const ncols = await page.evaluate((id) => document.getElementById(id).tHead.rows[0].cells.length, id);
    const cols = [];
    for (let c = 0; c < ncols; c++) {
      const keys = [];
      for (let k = 0; k < 2; k++) {
        await page.click(`#${id} thead th:nth-child(${c + 1}) button`);
        keys.push(await page.evaluate((id, c) => {
          const t = document.getElementById(id);
          return {
            sort: t.tHead.rows[0].cells[c].getAttribute("aria-sort"),
            keys: Array.from(t.tBodies[0].rows).map((r) => {
              const v = r.cells[c].getAttribute("data-v");
              return v !== null ? Number(v) : r.cells[c].textContent.trim().toLowerCase();
            }),
          };
        }, id, c));
      }
      cols.push({ title: await page.evaluate((id, c) => document.getElementById(id).tHead.rows[0].cells[c].textContent, id, c),
        asc: keys[0], desc: keys[1] });
    }
    out.tables[id] = cols;
  }
  if (filter_text) {
    out.filters = await page.evaluate(() => Array.from(document.querySelectorAll("input[data-filter]")).map((i) => i.getAttribute("data-filter")));
    out.filtered = {};
    for (const id of out.filters) {
      await page.type(`input[data-filter="${id}"]`, filter_text);
      out.filtered[id] = await page.evaluate((id) => ({
        shown: Array.from(document.getElementById(id).tBodies[0].rows).filter((r) => !r.hidden).length,
        output: document.getElementById(id + "-shown").textContent,
      }), id);
    }
  }
  // hover a drawn point that nothing covers around its centre (points of two series may overlap, and a pointer
  // on the edge of another point's circle would name that one): the readout shows its values
  const points = await page.$$("figure[data-chart] svg circle.point");
  for (const el of points) {
    const clear = await page.evaluate((el) => {
      el.scrollIntoView({ block: "center", inline: "center" });
      const r = el.getBoundingClientRect(), cx = r.x + r.width / 2, cy = r.y + r.height / 2;
      return [[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1]].every(([dx, dy]) => document.elementFromPoint(cx + dx, cy + dy) === el);
    }, el);
    if (!clear) continue;
    await el.hover();
    out.readout = await page.evaluate((el) => el.closest("figure").querySelector(".readout").textContent, el);
    out.hovered_title = await page.evaluate((el) => el.querySelector("title").textContent, el);
    break;
  }
  if (shot) await page.screenshot({ path: shot, fullPage: true });
}

main().catch((e) => { process.stderr.write(String(e && e.stack || e) + "\n"); process.exit(1); });
