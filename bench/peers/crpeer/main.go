// Command crpeer is a controller-runtime operator doing what `reconciler` does
// on its first pass, as a peer for the benchmark (see bench/kopf_peer.py for
// the kopf one).
//
// It is written the way kubebuilder users write operators: a manager, one
// controller per kind built with ctrl.NewControllerManagedBy, informer caches
// (also for the unstructured custom resources), a field index of pods by
// controller, controllerutil for owner references and the finalizer, and the
// manager's event recorder.
//
// Same end state as the reconciler's: spec.num pods per Redis, owned with
// controller=true and carrying the same manifest (bar the managed-by label), a
// headless Service and (from two pods) a PodDisruptionBudget per Redis, a
// finalizer, status.replicas and status.readyReplicas; each Xca's
// status.active and status.last_update_time; and the same CreatePod and
// Activated events.
//
// Run: crpeer --namespace NS [--kubeconfig FILE] [--qps 1000] [--burst 2000]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// maxConcurrentReconciles matches the reconciler's default of 8 concurrent
// writers, for a like-for-like comparison.
const maxConcurrentReconciles = 8

func main() {
	var (
		namespace   string
		qps         float64
		burst       int
		metricsAddr string
		probeAddr   string
	)
	// --kubeconfig is registered by controller-runtime itself (KUBECONFIG and
	// in-cluster config are its fallbacks).
	flag.StringVar(&namespace, "namespace", "", "Watch only this namespace (default: all namespaces).")
	flag.Float64Var(&qps, "qps", 1000, "Client-side QPS limit towards the API server.")
	flag.IntVar(&burst, "burst", 2000, "Client-side burst towards the API server.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "Metrics endpoint address; 0 disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "0", "Health probe address; 0 disables it.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("crpeer")
	if err := run(namespace, qps, burst, metricsAddr, probeAddr); err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

func run(namespace string, qps float64, burst int, metricsAddr, probeAddr string) error {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS = float32(qps)
	cfg.Burst = burst

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}

	ours := labels.SelectorFromSet(labels.Set{labelManagedBy: managedBy})
	cacheOpts := cache.Options{
		// Only our own pods, Services and budgets: the reconciler and the kopf
		// peer also list only the pods (and children) they manage.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                   {Label: ours},
			&corev1.Service{}:               {Label: ours},
			&policyv1.PodDisruptionBudget{}: {Label: ours},
		},
	}
	if namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOpts,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         false,
		// Read the unstructured custom resources from the informer cache too,
		// as typed ones would be (controller-runtime reads them live otherwise).
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	if probeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return err
		}
	}

	ctx := ctrl.SetupSignalHandler()
	if err := indexPodsByController(ctx, mgr); err != nil {
		return fmt.Errorf("pod index: %w", err)
	}

	opts := controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}
	redis := &RedisReconciler{
		Client:   mgr.GetClient(),
		Scheme:   mgr.GetScheme(),
		Recorder: mgr.GetEventRecorderFor(redisComponent),
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("redis").
		For(newRedis()).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		WithOptions(opts).
		Complete(redis); err != nil {
		return fmt.Errorf("redis controller: %w", err)
	}
	xca := &XcaReconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorderFor(xcaComponent),
	}
	if err := ctrl.NewControllerManagedBy(mgr).
		Named("xca").
		For(newXca()).
		WithOptions(opts).
		Complete(xca); err != nil {
		return fmt.Errorf("xca controller: %w", err)
	}

	if err := announceStarted(ctx, mgr); err != nil {
		return err
	}
	ctrl.Log.WithName("crpeer").Info("starting manager", "namespace", namespace, "qps", qps, "burst", burst)
	return mgr.Start(ctx)
}

// announceStarted prints "crpeer: started" on stderr once the informers of
// all its kinds have synced.
func announceStarted(ctx context.Context, mgr manager.Manager) error {
	// Register the informers now, so that the cache's sync covers them all.
	for _, obj := range []client.Object{newRedis(), newXca(), &corev1.Pod{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		if mgr.GetCache().WaitForCacheSync(ctx) {
			fmt.Fprintln(os.Stderr, "crpeer: started")
		}
		return nil
	}))
}
