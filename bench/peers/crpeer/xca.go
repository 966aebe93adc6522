package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const xcaComponent = "xca-controller"

var xcaGVK = schema.GroupVersionKind{Group: "apps.xca.k8s.kb.cx", Version: "v1beta1", Kind: "Xca"}

func newXca() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(xcaGVK)
	return u
}

// XcaReconciler activates each Xca once, with an event.
type XcaReconciler struct {
	client.Client
	Recorder record.EventRecorder
}

// +kubebuilder:rbac:groups=apps.xca.k8s.kb.cx,resources=xcas,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.xca.k8s.kb.cx,resources=xcas/status,verbs=get;update;patch

func (r *XcaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	xca := newXca()
	if err := r.Get(ctx, req.NamespacedName, xca); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !xca.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	if active, found, _ := unstructured.NestedBool(xca.Object, "status", "active"); found && active {
		return ctrl.Result{}, nil
	}
	base := xca.DeepCopy()
	now := time.Now().UTC().Format("2006-01-02T15:04:05Z")
	if err := unstructured.SetNestedField(xca.Object, true, "status", "active"); err != nil {
		return ctrl.Result{}, err
	}
	if err := unstructured.SetNestedField(xca.Object, now, "status", "last_update_time"); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Status().Patch(ctx, xca, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.Recorder.Eventf(xca, corev1.EventTypeNormal, "Activated", "Xca %s activated", xca.GetName())
	return ctrl.Result{}, nil
}
