// Behaviour the templates ask for with data attributes: the Content-Security-Policy allows no
// inline event handlers (onclick=...). Listened for on the document, so buttons and selects that
// htmx swaps in later are covered too.
//   data-confirm="Question?"  on a button: ask before it submits its form (Cancel keeps the page);
//   data-autosubmit           on a select: submit its form as soon as the choice changes;
//   data-unpooled-for-kind="growth" on the request form's GPU model select: its options marked
//                             data-no-pool (no pool has the card) are enabled only while the
//                             form's "kind" radio has that value (capacity no pool has yet);
//   data-node-from-file="id"  on a file input: when a file is chosen and the field with that id is
//                             empty, fill it with the file's name without its extension, if that
//                             is a node name (pools/common/validators.py; what import_inventory --node-from-filename does).
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
});
document.addEventListener("change", (event) => {
  if (event.target.matches("[data-autosubmit]") && event.target.form) event.target.form.submit();
});
document.addEventListener("change", (event) => {
  if (!event.target.matches("input[type=radio][name=kind]") || !event.target.form) return;
  const select = event.target.form.querySelector("select[data-unpooled-for-kind]");
  if (!select) return;
  const open = event.target.value === select.dataset.unpooledForKind;
  select.querySelectorAll("option[data-no-pool]").forEach((option) => {
    option.disabled = !open;
    if (!open && option.selected) select.value = "";
  });
});
// pools/common/validators.py's hostname_validator: at most 63 characters a label, 253 in all.
const NODE_NAME = /^(?=.{1,253}$)[A-Za-z0-9][A-Za-z0-9_-]{0,62}(?:\.[A-Za-z0-9_-]{0,63})*$/;
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!input.matches("input[type=file][data-node-from-file]") || !input.files.length) return;
  const node = document.getElementById(input.dataset.nodeFromFile);
  const stem = input.files[0].name.replace(/\.[^.]*$/, "");
  if (node && !node.value && NODE_NAME.test(stem)) {
    node.value = stem;
  }
});
// Phone tables (issue #37): a table whose header cells carry data-essential keeps those columns
// on a narrow screen and folds the others (portal.css, .key-cols); a button before it says how
// many columns are shown and unfolds the rest ("Show all N columns", the table then scrolls in
// its card). Cells are marked by the columns they span, so colspan rows (empty states, group
// rows) stay. Run on load and on every fragment htmx swaps in; htmx:load names each top-level
// element swapped in, which may be the table itself (the request form's "Where it can run").
//
// The unfold is the user's, not the element's: a fragment htmx swaps in brings a new table (the
// clusters list asks for its table every 3 s while a check is pending), which started folded and
// scrolled back to its first column. It is kept on the place the table sits in, which outlives
// the swap — the table's nearest ancestor with an id (the hx-target, #table) — by the table's
// position there, with how far the table (on a phone) and its .table-wrap were scrolled sideways.
const unfoldedTables = new WeakMap(); // place -> Map(position -> {table: px, wrap: px})
function tablePlace(table) {
  const place = (table.parentElement && table.parentElement.closest("[id]")) || document.body;
  if (!unfoldedTables.has(place)) unfoldedTables.set(place, new Map());
  return [unfoldedTables.get(place), Array.from(place.querySelectorAll("table")).indexOf(table)];
}
function tableWrap(table) {
  return (table.parentElement && table.parentElement.closest(".table-wrap")) || { scrollLeft: 0 };
}
function markKeyColumns(root) {
  const tables = Array.from(root.querySelectorAll("table"));
  if (root instanceof Element && root.matches("table")) tables.unshift(root);
  tables.forEach((table) => {
    const head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    if (!head || table.dataset.keyCols || !head.querySelector("[data-essential]")) return;
    const essential = new Set();
    let column = 0;
    for (const cell of head.cells) {
      for (let i = 0; i < cell.colSpan; i++) if (cell.hasAttribute("data-essential")) essential.add(column + i);
      column += cell.colSpan;
    }
    if (essential.size === column) return;
    for (const row of table.rows) {
      let at = 0;
      for (const cell of row.cells) {
        let key = false;
        for (let i = 0; i < cell.colSpan; i++) key = key || essential.has(at + i);
        cell.classList.toggle("col-extra", !key);
        at += cell.colSpan;
      }
    }
    table.dataset.keyCols = String(essential.size);
    table.classList.add("key-cols");
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.className = "cols-cue outline secondary";
    const label = () => table.classList.contains("all-cols")
      ? `Show the ${essential.size} key columns`
      : `${essential.size} of ${column} columns shown · Show all ${column}`;
    const show = () => {
      toggle.setAttribute("aria-expanded", String(table.classList.contains("all-cols")));
      toggle.textContent = label();
    };
    toggle.addEventListener("click", () => {
      table.classList.toggle("all-cols");
      const [unfolded, position] = tablePlace(table);
      if (table.classList.contains("all-cols")) unfolded.set(position, { table: 0, wrap: 0 });
      else unfolded.delete(position);
      show();
    });
    table.before(toggle);
    const [unfolded, position] = tablePlace(table);
    const kept = unfolded.get(position);
    if (kept) {
      table.classList.add("all-cols");
      table.scrollLeft = kept.table;
      tableWrap(table).scrollLeft = kept.wrap;
    }
    show();
  });
}
document.addEventListener("DOMContentLoaded", () => markKeyColumns(document));
document.addEventListener("htmx:load", (event) => markKeyColumns(event.target));
// Before a swap replaces unfolded tables, note how far each was scrolled (see tablePlace).
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (!target || !event.detail.shouldSwap) return;
  target.querySelectorAll("table.key-cols.all-cols").forEach((table) => {
    const [unfolded, position] = tablePlace(table);
    unfolded.set(position, { table: table.scrollLeft, wrap: tableWrap(table).scrollLeft });
  });
});
// A list's table (and the dashboard's body) answers 400 when its filters cannot be used (a
// team one may not see): the fragment says why, so it is swapped in like any other (htmx keeps
// 4xx answers out by default).
const REFUSAL_TARGETS = ["table", "dashboard-body"];
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (event.detail.xhr.status === 400 && target && REFUSAL_TARGETS.includes(target.id)) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
// A pager link whose page has gone (rows deleted since the page was drawn) answers 404, which
// htmx neither swaps nor shows: the click did nothing. Say so above the table, with a link to
// page 1 of the same list (its other parameters kept); the rows shown stay as they were.
document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target;
  if (event.detail.xhr.status !== 404 || !target || target.id !== "table") return;
  const url = new URL(event.detail.pathInfo.requestPath, window.location.href);
  url.searchParams.delete("page");
  target.querySelectorAll(".page-gone").forEach((old) => old.remove());
  const note = document.createElement("p");
  note.className = "page-gone notice error";
  note.setAttribute("role", "alert");
  const back = document.createElement("a");
  back.href = url.pathname + url.search;
  back.textContent = "back to page 1";
  note.append("That page no longer exists; ", back);
  target.prepend(note);
});
// The filters form sits outside #table (#dashboard-body), so a refused page's field errors (and the fields'
// aria-invalid) stayed under a team fixed since; each answer swapped into #table is the list's
// state now, its own refusal (includes/refusal.html) naming any filter it still cannot use.
document.addEventListener("htmx:afterSwap", (event) => {
  if (!event.detail.target || !REFUSAL_TARGETS.includes(event.detail.target.id)) return;
  document.querySelectorAll("form.filters").forEach((form) => {
    form.querySelectorAll(".errorlist").forEach((list) => list.remove());
    form.querySelectorAll("[aria-invalid]").forEach((field) => {
      field.removeAttribute("aria-invalid");
      if (/_error$/.test(field.getAttribute("aria-describedby") || "")) field.removeAttribute("aria-describedby");
    });
  });
});
// data-fields-from-url on a filters form that pushes its URL (hx-push-url): Back and Forward put
// back htmx's copy of the page, whose fields hold the values they were drawn with, not the ones
// the URL names (cleared since, or typed after), and the next change sent them again. After a
// history restore each field takes the URL's value(s); a text field or select it does not name
// is emptied (the form's "all"), a checkbox unticked; radios it does not name keep their choice
// (a range the page has a default for).
function fieldsFromUrl(form) {
  const query = new URLSearchParams(location.search);
  for (const field of form.elements) {
    if (!field.name || ["submit", "button", "reset"].includes(field.type)) continue;
    const values = query.getAll(field.name);
    if (field.type === "radio") {
      if (values.length) field.checked = values.includes(field.value);
    } else if (field.type === "checkbox") {
      field.checked = values.includes(field.value);
    } else if (field.tagName === "SELECT") {
      for (const option of field.options) option.selected = values.includes(option.value);
      if (!field.multiple && !values.length) field.value = "";
    } else {
      field.value = values.length ? values[0] : "";
    }
  }
}
document.addEventListener("htmx:historyRestore", () => {
  document.querySelectorAll("form[data-fields-from-url]").forEach(fieldsFromUrl);
});
// Back or Forward to an address htmx pushed and no longer holds in its history cache asks the
// server for it (HX-History-Restore-Request, answered with the whole page: portal.middleware.
// HtmxMiddleware); htmx swaps in only a 2xx or 3xx answer, so a page answering 400 (a list under
// a filter it refuses) left the page before under the new address. Load it as a browser would.
document.addEventListener("htmx:historyCacheMissLoadError", () => window.location.reload());
// data-copy="id" on a button: copy the value of the field with that id (the team's calendar
// link); the button says "Copied" for two seconds.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  const field = button && document.getElementById(button.dataset.copy);
  if (!field) return;
  field.select();
  const done = () => {
    const label = button.textContent;
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = label; }, 2000);
  };
  const fallback = () => { if (document.execCommand("copy")) done(); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(field.value).then(done, fallback);
  else fallback();
});
// A form with a form_token field (the request form) sends its first token again when Back
// brought the page up and it is sent unchanged: the page is no-store, so Back fetches it afresh
// with a fresh token while the browser puts the typed fields back, and a second Submit wrote a
// second request. The server answers a token it has seen with the request it made (capacity_
// request_create_once). Kept per tab (sessionStorage) and page; a changed form is a new request.
function formSnapshot(form) {
  const data = new FormData(form);
  data.delete("form_token");
  data.delete("csrfmiddlewaretoken");
  return JSON.stringify(Array.from(data.entries()));
}
document.addEventListener("submit", (event) => {
  const form = event.target;
  const token = form.querySelector("input[name=form_token]");
  if (!token) return;
  const key = `form_token:${location.pathname}`;
  const navigation = performance.getEntriesByType("navigation")[0];
  const sent = JSON.parse(sessionStorage.getItem(key) || "null");
  if (
    sent &&
    navigation &&
    navigation.type === "back_forward" &&
    sent.snapshot === formSnapshot(form)
  ) {
    token.value = sent.token;
  }
  const kept = { token: token.value, snapshot: formSnapshot(form) };
  sessionStorage.setItem(key, JSON.stringify(kept));
});
// Numbers in charts read as the pages' own text does (the |grouped filter, pools/web/numbers.py):
// thousands apart by a narrow no-break space, "12 000", where Chart.js writes the browser's
// locale ("12,000"). groupedNumber(text) regroups what Chart.js or toLocaleString("en") wrote
// (only a comma between a digit and three more: a label's "A, B" stays); chartNumber(value,
// digits) writes a number, at most `digits` decimals. On a page that loads Chart.js (its deferred
// script runs before this one: templates/base.html) every linear axis's ticks and every
// tooltip's value go through them, unless a chart gives its own callback; the charts that do
// (amounts with a currency, a log axis) call them too.
function groupedNumber(text) {
  return String(text).replace(/(\d),(?=\d{3}(?!\d))/g, "$1\u202f");
}
function chartNumber(value, digits = 2) {
  return groupedNumber(Number(value).toLocaleString("en", { maximumFractionDigits: digits }));
}
if (window.Chart) {
  // Chart.js' own tick formatter (its decimals follow the step), regrouped
  Chart.defaults.scales.linear.ticks.callback = function (value, index, ticks) {
    return groupedNumber(Chart.Ticks.formatters.numeric.call(this, value, index, ticks));
  };
  // Chart.js' default label ("dataset: value"), the value regrouped
  Chart.defaults.plugins.tooltip.callbacks.label = (item) => {
    const value = item.formattedValue == null ? "" : groupedNumber(item.formattedValue);
    return item.dataset.label ? `${item.dataset.label}: ${value}` : value;
  };
}
