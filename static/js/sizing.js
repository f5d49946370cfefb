// Sizing pages: show only the inputs of the chosen load and model kind, and draw the chart of
// cards (and monthly cost) per GPU model - again after every htmx swap of the results.
(function () {
  "use strict";

  function toggleInputs(form) {
    if (!form) return;
    const kind = form.querySelector("input[name=demand_kind]:checked");
    form.querySelectorAll("[data-kind]").forEach((el) => {
      el.hidden = !kind || el.dataset.kind !== kind.value;
    });
    const model = form.querySelector("select[name=model]");
    const custom = document.getElementById("custom-model");
    if (model && custom) custom.hidden = model.value !== "custom";
  }

  // "Custom architecture" starts from the preset chosen before it, when its fields are empty;
  // its name then reads "<preset> (modified)" (kept to tell a pasted config.json from edits).
  let lastPreset = null;
  let presetName = null;

  function startCustomFromPreset(select) {
    if (select.value !== "custom") {
      lastPreset = select.selectedOptions[0];
      return;
    }
    const fields = Array.from(document.querySelectorAll("#custom-model input"));
    if (!lastPreset || fields.some((input) => input.value.trim() !== "")) return;
    const config = JSON.parse(lastPreset.dataset.config || "{}");
    fields.forEach((input) => {
      const key = input.name.replace("custom_model.", "");
      if (config[key] !== null && config[key] !== undefined) input.value = config[key];
    });
    presetName = config.name || null;
  }

  // A config.json pasted or uploaded replaces the architecture fields (they would override it),
  // and the preset's name with them: a pasted Llama config was sized as "Qwen2.5-72B
  // (modified)". A name the user typed stays.
  function useConfig(textarea) {
    if (!textarea.value.trim()) return;
    document.querySelectorAll("#custom-model input[type=number]").forEach((input) => {
      input.value = "";
    });
    const name = document.querySelector("#custom-model input[name='custom_model.name']");
    if (name && presetName !== null && name.value === presetName) name.value = "";
  }

  function readUpload(input) {
    const file = input.files && input.files[0];
    const textarea = document.querySelector("textarea[name='custom_model.config']");
    if (!file || !textarea) return;
    file.text().then((text) => {
      textarea.value = text;
      useConfig(textarea);
      textarea.dispatchEvent(new Event("change", { bubbles: true }));
    });
  }

  // Inputs named in the results' error list are marked invalid (Pico draws them red).
  function markInvalid() {
    const form = document.getElementById("sizing-form");
    if (!form) return;
    const bad = new Set(
      Array.from(document.querySelectorAll("#results [data-field]")).map((li) => li.dataset.field)
    );
    form.querySelectorAll("input[name], select[name], textarea[name]").forEach((input) => {
      if (bad.has(input.name)) {
        input.setAttribute("aria-invalid", "true");
        // An input at fault inside a folded section (prices, parallelism ...) is shown.
        const section = input.closest("details");
        if (section) section.open = true;
      } else input.removeAttribute("aria-invalid");
    });
    // On a phone the list sits below the whole form: the form's top says how many and links it.
    const banner = document.getElementById("sizing-error-banner");
    if (!banner) return;
    const count = document.querySelectorAll("#results .errorlist > li").length;
    banner.hidden = count === 0;
    const link = banner.querySelector("a");
    if (link) link.textContent = count + (count === 1 ? " input" : " inputs") + " to fix";
  }

  let chart = null;

  function drawChart() {
    if (chart) {
      chart.destroy();
      chart = null;
    }
    const canvas = document.getElementById("sizing-chart");
    const source = document.getElementById("sizing-chart-data");
    if (!canvas || !source || !window.Chart) return;
    const data = JSON.parse(source.textContent);
    const datasets = [{
      label: "cards needed",
      data: data.cards,
      backgroundColor: data.meets.map((ok) => (ok ? "#0072B2" : "#B8BEC8")),
      xAxisID: "x",
    }];
    // Cards can run from 1 to thousands: a log axis when they spread over more than 20x,
    // starting at half a card so that one card still shows a bar. Label 1, 2 and 5 per decade.
    const ticks = {
      callback: (value) => {
        const lead = value / 10 ** Math.floor(Math.log10(value) + 1e-9);
        const shown = [1, 2, 5].some((n) => Math.abs(lead - n) < 1e-6);
        // grouped as the page's numbers are (portal.js)
        return shown ? chartNumber(value, 3) : "";
      },
    };
    function axis(values, label, extra) {
      const known = values.filter((v) => v !== null && v > 0);
      const log = known.length > 0 && Math.max(...known) / Math.min(...known) > 20;
      return Object.assign(
        log
          ? { type: "logarithmic", min: Math.min(...known) / 2, ticks: ticks }
          : { type: "linear", beginAtZero: true },
        { title: { display: true, text: log ? label + " (log scale)" : label } },
        extra || {}
      );
    }
    // Every bar keeps its GPU model's name: Chart.js skips crowded category labels.
    const scales = { x: axis(data.cards, "cards"), y: { ticks: { autoSkip: false } } };
    if (data.cost) {
      datasets.push({ label: "monthly cost", data: data.cost, backgroundColor: "#E69F00", xAxisID: "x2" });
      const costLabel = data.currency ? "monthly cost, " + data.currency : "monthly cost";
      scales.x2 = axis(data.cost, costLabel, { position: "top", grid: { drawOnChartArea: false } });
    }
    chart = new Chart(canvas, {
      type: "bar",
      data: { labels: data.labels, datasets: datasets },
      options: {
        indexAxis: "y", maintainAspectRatio: false, animation: false, scales: scales,
        plugins: { legend: { display: Boolean(data.cost), position: "bottom" } },
      },
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("sizing-form");
    toggleInputs(form);
    const model = form && form.querySelector("select[name=model]");
    if (model && model.value !== "custom") lastPreset = model.selectedOptions[0];
    markInvalid();
    drawChart();
  });
  // Capture phase: the fields are filled before htmx, listening on the form, sends them.
  document.addEventListener(
    "change",
    (event) => {
      const form = event.target.closest && event.target.closest("#sizing-form");
      if (!form) return;
      if (event.target.name === "model") startCustomFromPreset(event.target);
      if (event.target.id === "config-upload") {
        event.stopPropagation(); // the text box's own change sends the form
        readUpload(event.target);
        return;
      }
      if (event.target.name === "custom_model.config") useConfig(event.target);
      toggleInputs(form);
    },
    true
  );
  // The results' "Export CSV" of a pasted config.json (no address holds one) posts the form's
  // fields, added here as it is sent: the results do not carry the config back with them (a
  // 3 MB paste made every preview 3 MB longer).
  document.addEventListener("formdata", (event) => {
    const form = document.getElementById("sizing-form");
    if (event.target.id !== "csv-by-post" || !form) return;
    new FormData(form).forEach((value, name) => event.formData.append(name, value));
  });
  document.addEventListener("htmx:afterSettle", () => {
    markInvalid();
    drawChart();
  });
  // A preview or save the server refused (4xx, 5xx) or that never reached it: htmx swaps
  // nothing, so the results shown were silently those of the inputs before. Say so above them
  // (the next answer replaces the results, and the note with them).
  function requestFailed(event, why) {
    const results = document.getElementById("results");
    if (!results || !event.detail.target || event.detail.target.id !== "results") return;
    const saving = event.detail.elt && event.detail.elt.id === "save-estimate";
    results.querySelectorAll(".request-failed").forEach((old) => old.remove());
    const note = document.createElement("p");
    note.className = "request-failed notice error";
    note.setAttribute("role", "alert");
    note.textContent = (saving ? "The estimate was not saved: " : "These inputs were not recomputed: ")
      + why + " The results below are for the inputs before.";
    results.prepend(note);
  }
  document.addEventListener("htmx:responseError", (event) => {
    requestFailed(event, "the portal answered " + event.detail.xhr.status + ".");
  });
  document.addEventListener("htmx:sendError", (event) => {
    requestFailed(event, "the portal could not be reached.");
  });
  // A field the browser itself refuses (a number below its minimum, say): htmx sends nothing,
  // so, as above, the results would silently stay those of the inputs before.
  document.addEventListener("htmx:validation:halted", (event) => {
    const first = (event.detail.errors || [])[0];
    if (!first || !first.elt) return;
    const label = first.elt.labels && first.elt.labels[0];
    const name = label ? label.textContent.trim() : first.elt.name;
    const message = (first.message || "not accepted").replace(/\.?$/, ".");
    requestFailed(event, name + ": " + message);
  });
})();
