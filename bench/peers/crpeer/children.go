package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// What a Redis makes besides its pods, as reconciler/kinds/redis/service.py
// and disruption.py have them: a headless Service that publishes only Ready
// pods, and, while it has two pods or more, a PodDisruptionBudget that lets
// one be unavailable at a time. Each is kept as it should be by
// controllerutil.CreateOrUpdate, the way kubebuilder users keep children.

const (
	portName       = "redis"
	maxUnavailable = 1
)

func selectorOf(redis *unstructured.Unstructured) map[string]string {
	return map[string]string{labelName: appName, labelInstance: redis.GetName()}
}

func childLabels(redis *unstructured.Unstructured) map[string]string {
	labels := selectorOf(redis)
	labels[labelManagedBy] = managedBy
	return labels
}

// ensureChildren makes or repairs the Service and the budget of a Redis.
func (r *RedisReconciler) ensureChildren(ctx context.Context, redis *unstructured.Unstructured, spec redisSpec) error {
	if err := r.ensureService(ctx, redis, spec); err != nil {
		return err
	}
	return r.ensureBudget(ctx, redis, spec)
}

func (r *RedisReconciler) ensureService(ctx context.Context, redis *unstructured.Unstructured, spec redisSpec) error {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: redis.GetName(), Namespace: redis.GetNamespace()}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		for k, v := range childLabels(redis) {
			if svc.Labels == nil {
				svc.Labels = map[string]string{}
			}
			svc.Labels[k] = v
		}
		svc.Spec.ClusterIP = corev1.ClusterIPNone
		svc.Spec.Selector = selectorOf(redis)
		svc.Spec.PublishNotReadyAddresses = false
		svc.Spec.Ports = []corev1.ServicePort{{
			Name:       portName,
			Port:       spec.port,
			TargetPort: intstr.FromString(portName),
			Protocol:   corev1.ProtocolTCP,
		}}
		return controllerutil.SetControllerReference(redis, svc, r.Scheme)
	})
	return err
}

func (r *RedisReconciler) ensureBudget(ctx context.Context, redis *unstructured.Unstructured, spec redisSpec) error {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: redis.GetName(), Namespace: redis.GetNamespace()}}
	if spec.num < 2 {
		// One pod or none: a budget would block every drain.
		if err := r.Get(ctx, client.ObjectKeyFromObject(pdb), pdb); err != nil {
			return client.IgnoreNotFound(err)
		}
		return client.IgnoreNotFound(r.Delete(ctx, pdb, client.Preconditions{UID: &pdb.UID}))
	}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, pdb, func() error {
		for k, v := range childLabels(redis) {
			if pdb.Labels == nil {
				pdb.Labels = map[string]string{}
			}
			pdb.Labels[k] = v
		}
		most := intstr.FromInt32(maxUnavailable)
		always := policyv1.AlwaysAllow
		pdb.Spec.MinAvailable = nil
		pdb.Spec.MaxUnavailable = &most
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorOf(redis)}
		pdb.Spec.UnhealthyPodEvictionPolicy = &always
		return controllerutil.SetControllerReference(redis, pdb, r.Scheme)
	})
	return err
}
