// Serving panel: one small line chart per signal group, from the panel's JSON (pools/serving/views.py).
(function () {
  function draw(root) {
    const panel = root.querySelector ? root.querySelector("[data-serving-panel]") || (root.matches && root.matches("[data-serving-panel]") ? root : null) : null;
    if (!panel || !window.Chart) return;
    const script = panel.querySelector("#serving-chart-data");
    if (!script) return;
    const data = JSON.parse(script.textContent);
    panel.querySelectorAll("canvas[data-chart-index]").forEach((canvas) => {
      // an htmx part settling inside the panel (the estimate form) reaches here again
      if (Chart.getChart(canvas)) return;
      const chart = data.charts[Number(canvas.dataset.chartIndex)];
      new Chart(canvas, {
        type: "line",
        data: {labels: data.labels, datasets: chart.sets.map((s) => ({label: s.label, data: s.data, pointRadius: 0, borderWidth: 1.5, spanGaps: false}))},
        options: {maintainAspectRatio: false, animation: false, plugins: {legend: {labels: {boxWidth: 10}}},
          scales: {x: {ticks: {maxTicksLimit: 6, callback: function (v) { return String(this.getLabelForValue(v)).slice(5, 16).replace("T", " "); }}},
                   // ticks and tooltips grouped as the page's numbers are: portal.js' chart defaults
                   y: {beginAtZero: true}}},
      });
    });
  }
  document.addEventListener("DOMContentLoaded", () => draw(document));
  document.addEventListener("htmx:afterSettle", (event) => draw(event.detail.elt.parentNode || document));
})();
