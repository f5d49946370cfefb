// Behaviour the templates ask for with data attributes: the Content-Security-Policy allows no
// inline event handlers (onclick=...). Listened for on the document, so buttons and selects that
// htmx swaps in later are covered too.
//   data-confirm="Question?"  on a button: ask before it submits its form (Cancel keeps the page);
//   data-autosubmit           on a select: submit its form as soon as the choice changes;
//   data-node-from-file="id"  on a file input: when a file is chosen and the field with that id is
//                             empty, fill it with the file's name without its extension, if that
//                             is a node name (pools/validators.py; what import_inventory --node-from-filename does).
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-confirm]");
  if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
});
document.addEventListener("change", (event) => {
  if (event.target.matches("[data-autosubmit]") && event.target.form) event.target.form.submit();
});
document.addEventListener("change", (event) => {
  const input = event.target;
  if (!input.matches("input[type=file][data-node-from-file]") || !input.files.length) return;
  const node = document.getElementById(input.dataset.nodeFromFile);
  const stem = input.files[0].name.replace(/\.[^.]*$/, "");
  if (node && !node.value && /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/.test(stem)) {
    node.value = stem;
  }
});
