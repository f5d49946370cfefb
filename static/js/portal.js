// Behaviour the templates ask for with data attributes: the Content-Security-Policy allows no
// inline event handlers (onclick=...). Listened for on the document, so buttons and selects that
// htmx swaps in later are covered too.
//   data-confirm="Question?"  on a button: ask before it submits its form (Cancel keeps the page);
//   data-autosubmit           on a select: submit its form as soon as the choice changes.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
});
document.addEventListener("change", (event) => {
  if (event.target.matches("[data-autosubmit]") && event.target.form) event.target.form.submit();
});
