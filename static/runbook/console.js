// Fold toggles: a button that shows or hides the element it controls. On a phone the console
// folds its navigation and the list's filters away behind one each (console.css shows the
// buttons only there). A file of our own: the CSP allows no inline script.
document.addEventListener("click", (event) => {
  const button = event.target.closest("button.fold-toggle");
  if (button === null) {
    return;
  }
  const folded = document.getElementById(button.getAttribute("aria-controls"));
  const open = button.getAttribute("aria-expanded") !== "true";
  button.setAttribute("aria-expanded", String(open));
  folded.classList.toggle("open", open);
});
