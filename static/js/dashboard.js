// Capacity dashboard (templates/dashboard/admin.html): the "held vs usable" plan chart and the
// utilisation chart, each drawn from the JSON the page puts beside its canvas
// (#plan-chart-data, #util-chart-data; billing/dashboards/views.py). A static file, not an
// inline script: htmx's Back and Forward put the page back by swapping its body in, and an
// inline script swapped in carries no nonce the page's Content-Security-Policy accepts.
// Drawn when the page loads, when the body (the filters, the 60-second refresh) or the
// utilisation box settles, and after a history restore (the canvases come back blank).
(function () {
  const charts = {};
  function drawChart(name, canvasId, options) {
    if (charts[name]) { charts[name].destroy(); charts[name] = null; }
    const canvas = document.getElementById(canvasId);
    const source = document.getElementById(`${canvasId}-data`);
    if (!canvas || !source || !window.Chart) return;
    charts[name] = new Chart(canvas, Object.assign({ data: JSON.parse(source.textContent) }, options));
  }
  function drawPlan() {
    drawChart("plan", "plan-chart", {
      options: {
        maintainAspectRatio: false, animation: false,
        scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "cards" } } },
        // line datasets (usable cards, dashed) show a line in the legend, not a filled box
        plugins: { legend: { position: "bottom", labels: { usePointStyle: true } } },
      },
    });
  }
  function drawUtilisation() {
    drawChart("utilisation", "util-chart", {
      type: "line",
      options: {
        maintainAspectRatio: false, animation: false, interaction: { mode: "index", intersect: false },
        scales: {
          x: { ticks: { maxTicksLimit: 12, maxRotation: 0 } },
          y: { min: 0, max: 100, title: { display: true, text: "mean utilisation, %" } },
        },
        plugins: { legend: { position: "bottom" },
                   tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.parsed.y === null ? "no reading" : c.parsed.y.toFixed(1) + " %"}` } } },
      },
    });
  }
  document.addEventListener("DOMContentLoaded", drawPlan);
  document.addEventListener("htmx:afterSettle", (event) => {
    if (event.target.id === "dashboard-body") drawPlan();
    if (event.target.id === "utilisation") drawUtilisation();
  });
  // the utilisation box reloads itself (hx-trigger="load") and is drawn when it settles
  document.addEventListener("htmx:historyRestore", drawPlan);
})();
