// Token flow page: the calls-per-task bar chart, from the page's JSON (billing/tokenflow/views.py).
(function () {
  document.addEventListener("DOMContentLoaded", () => {
    const card = document.querySelector("[data-token-flow-chart]");
    const script = document.getElementById("token-flow-chart-data");
    if (!card || !script || !window.Chart) return;
    const data = JSON.parse(script.textContent);
    new Chart(card.querySelector("canvas"), {
      type: "bar",
      data: {labels: data.labels, datasets: [{label: "tasks", data: data.tasks, backgroundColor: "#0072B2"}]},
      options: {maintainAspectRatio: false, animation: false, plugins: {legend: {display: false}},
        scales: {x: {title: {display: true, text: "model calls in the task"}},
                 y: {beginAtZero: true, ticks: {precision: 0}, title: {display: true, text: "tasks"}}}},
    });
  });
})();
