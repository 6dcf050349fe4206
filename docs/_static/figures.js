// On a narrow screen a figure keeps its own size, and one wider than its box scrolls
// sideways there (custom.css). Mark each box that does, so that custom.css shows a line
// saying so above it; tests/site checks that no clipped figure goes without one.
(function () {
  "use strict";

  var BOXES = ".bd-article .cell_output, .bd-article figure, .bd-article .figure-box";

  // sphinx-gallery puts its figures straight into the page's text: give each a box of
  // its own to scroll in, as a notebook cell's output has.
  function boxGalleryFigures() {
    var loose = document.querySelectorAll(
      ".bd-article img.sphx-glr-single-img, .bd-article img.sphx-glr-multi-img"
    );
    loose.forEach(function (img) {
      if (img.parentElement.classList.contains("figure-box")) return;
      var box = document.createElement("div");
      box.className = "figure-box";
      img.parentNode.insertBefore(box, img);
      box.appendChild(img);
    });
  }

  function markScrollingFigures() {
    document.querySelectorAll(BOXES).forEach(function (box) {
      var shown = Array.prototype.some.call(box.querySelectorAll("img"), function (img) {
        return img.getBoundingClientRect().width > 0;
      });
      box.classList.toggle("figure-scrolls", shown && box.scrollWidth > box.clientWidth + 1);
    });
  }

  document.addEventListener("DOMContentLoaded", boxGalleryFigures);
  window.addEventListener("load", markScrollingFigures);
  window.addEventListener("resize", markScrollingFigures);
})();
