/* A stand-in for Web Workers on pages opened from the file system: browsers refuse
   `new Worker("file://...")`, so the search worker's script runs in a hidden iframe of the same
   origin and messages pass between the two as events. litjudge's own, so that the site needs
   nothing from a CDN (material's offline plugin would load its shim from unpkg.com). Served over
   HTTP, the browser's own Worker is used. */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class IFrameWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.pending = [];
      this.loaded = false;
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      document.body.appendChild(this.frame);
      const scope = this.frame.contentWindow;
      scope.postMessage = (data) => this.deliver(data);      // the worker's `postMessage(...)`
      scope.importScripts = () => Promise.resolve();          // only other languages' stemmers use it
      const script = scope.document.createElement("script");
      script.src = new URL(url, location.href).href;
      script.onload = () => {
        this.loaded = true;
        this.pending.splice(0).forEach((data) => this.postMessage(data));
      };
      scope.document.head.appendChild(script);
    }

    deliver(data) {
      const event = new MessageEvent("message", { data });
      if (typeof this.onmessage === "function") this.onmessage(event);
      this.dispatchEvent(event);
    }

    postMessage(data) {
      if (!this.loaded) {
        this.pending.push(data);
        return;
      }
      const scope = this.frame.contentWindow;
      scope.dispatchEvent(new scope.MessageEvent("message", { data }));
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.IFrameWorker = IFrameWorker;
  window.Worker = IFrameWorker;
})();
