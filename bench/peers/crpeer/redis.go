package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The Redis kind and the pods it asks for, as reconciler/kinds/redis.py has them.
const (
	redisGroup     = "myapp.demo.kubebuilder.io"
	redisComponent = "redis-controller"
	finalizer      = "crpeer.bench/finalizer"
	hashAnnotation = redisGroup + "/template-hash"

	labelName      = "app.kubernetes.io/name"
	labelInstance  = "app.kubernetes.io/instance"
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedBy      = "crpeer"

	appName       = "redis"
	containerName = "redis"
	defaultImage  = "redis:5-alpine"
	portDefault   = 6379
	portMin       = 6370
	portMax       = 6380
	numMax        = 100
	nameMax       = 63 // the name is each pod's app.kubernetes.io/instance label value

	// podControllerUID indexes pods by the uid of their controller.
	podControllerUID = ".metadata.controller.uid"
)

var redisGVK = schema.GroupVersionKind{Group: redisGroup, Version: "v1", Kind: "Redis"}

// The reconciler's conservative image reference: [registry[:port]/]path[:tag][@digest].
var imageRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._/-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*` +
	`(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$`)

func newRedis() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(redisGVK)
	return u
}

// RedisReconciler keeps spec.num pods for each Redis.
type RedisReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder record.EventRecorder
}

type redisSpec struct {
	num   int
	port  int32
	image string
}

// parseSpec re-checks the fields the pods rely on, as validate_spec does,
// since objects can bypass the CRD schema.
func parseSpec(redis *unstructured.Unstructured) (redisSpec, error) {
	spec, _, _ := unstructured.NestedMap(redis.Object, "spec")
	var errs []string
	if n := len(redis.GetName()); n > nameMax {
		errs = append(errs, fmt.Sprintf("metadata.name: must be at most %d characters, got %d", nameMax, n))
	}
	out := redisSpec{num: 0, port: portDefault, image: defaultImage}
	if v, ok := spec["port"]; ok {
		p, isInt := v.(int64)
		switch {
		case !isInt:
			errs = append(errs, fmt.Sprintf("spec.port: must be an integer, got %v", v))
		case p < portMin || p > portMax:
			errs = append(errs, fmt.Sprintf("spec.port: must be between %d and %d, got %d", portMin, portMax, p))
		default:
			out.port = int32(p)
		}
	}
	if v, ok := spec["num"]; ok {
		n, isInt := v.(int64)
		switch {
		case !isInt:
			errs = append(errs, fmt.Sprintf("spec.num: must be an integer, got %v", v))
		case n < 0 || n > numMax:
			errs = append(errs, fmt.Sprintf("spec.num: must be between 0 and %d, got %d", numMax, n))
		default:
			out.num = int(n)
		}
	}
	if v, ok := spec["image"]; ok && v != nil && v != "" {
		s, isStr := v.(string)
		switch {
		case !isStr:
			errs = append(errs, fmt.Sprintf("spec.image: must be a string, got %v", v))
		case !imageRE.MatchString(s):
			errs = append(errs, fmt.Sprintf("spec.image: is not a valid image reference: %q", s))
		default:
			out.image = s
		}
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("invalid spec: %s", strings.Join(errs, "; "))
	}
	return out, nil
}

// templateHash is reconciler's template_hash: sha256 of Python's
// json.dumps({...}, sort_keys=True), first 10 hex digits. The image pattern
// admits no character that JSON would escape.
func templateHash(spec redisSpec) string {
	doc := fmt.Sprintf(`{"container": %q, "image": %q, "port": %d}`, containerName, spec.image, spec.port)
	sum := sha256.Sum256([]byte(doc))
	return hex.EncodeToString(sum[:])[:10]
}

func podName(redis *unstructured.Unstructured, index int) string {
	return fmt.Sprintf("%s-%d", redis.GetName(), index)
}

// podIndex is the index in "<redis>-<index>", or -1.
func podIndex(redisName, name string) int {
	tail, ok := strings.CutPrefix(name, redisName+"-")
	if !ok || tail == "" || (tail[0] == '0' && len(tail) > 1) {
		return -1
	}
	for _, c := range tail {
		if c < '0' || c > '9' {
			return -1
		}
	}
	i, err := strconv.Atoi(tail)
	if err != nil {
		return -1
	}
	return i
}

// podFor is reconciler's pod_manifest, its default spread included, with our
// managed-by label and the controller reference set by controllerutil.
func (r *RedisReconciler) podFor(redis *unstructured.Unstructured, spec redisSpec, index int) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(redis, index),
			Namespace: redis.GetNamespace(),
			Labels: map[string]string{
				labelName:      appName,
				labelInstance:  redis.GetName(),
				labelManagedBy: managedBy,
			},
			Annotations: map[string]string{hashAnnotation: templateHash(spec)},
		},
		Spec: corev1.PodSpec{
			// The reconciler's default spread: each pod of one Redis prefers a
			// node without another (reconciler/kinds/redis/placement.py).
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{
						TopologyKey:   "kubernetes.io/hostname",
						LabelSelector: &metav1.LabelSelector{MatchLabels: selectorOf(redis)},
					},
				}},
			}},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           spec.image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Ports: []corev1.ContainerPort{{
					Name:          "redis",
					ContainerPort: spec.port,
					Protocol:      corev1.ProtocolTCP,
				}},
			}},
		},
	}
	// controller=true, blockOwnerDeletion=true
	if err := controllerutil.SetControllerReference(redis, pod, r.Scheme); err != nil {
		return nil, err
	}
	return pod, nil
}

// indexPodsByController lets a Redis list its pods from the cache.
func indexPodsByController(ctx context.Context, mgr manager.Manager) error {
	return mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, podControllerUID, func(obj client.Object) []string {
		owner := metav1.GetControllerOf(obj)
		if owner == nil || owner.Kind != redisGVK.Kind || owner.APIVersion != redisGVK.GroupVersion().String() {
			return nil
		}
		return []string{string(owner.UID)}
	})
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podEvent is the reconciler's message: "Created pods r-0, r-1: scale up".
func podEvent(verb string, names []string, why string) string {
	noun := "pod"
	if len(names) > 1 {
		noun = "pods"
	}
	return fmt.Sprintf("%s %s %s: %s", verb, noun, strings.Join(names, ", "), why)
}

// +kubebuilder:rbac:groups=myapp.demo.kubebuilder.io,resources=redis,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=myapp.demo.kubebuilder.io,resources=redis/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

func (r *RedisReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	redis := newRedis()
	if err := r.Get(ctx, req.NamespacedName, redis); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(req.Namespace),
		client.MatchingFields{podControllerUID: string(redis.GetUID())}); err != nil {
		return ctrl.Result{}, err
	}

	if !redis.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, r.finalize(ctx, redis, pods.Items)
	}

	// The finalizer first, so that no pod exists unguarded.
	if controllerutil.AddFinalizer(redis, finalizer) {
		if err := r.Update(ctx, redis); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}

	spec, err := parseSpec(redis)
	if err != nil {
		// Leave the pods alone; a new spec brings a new reconcile.
		r.Recorder.Event(redis, corev1.EventTypeWarning, "InvalidSpec", err.Error())
		return ctrl.Result{}, nil
	}

	byIndex := map[int]*corev1.Pod{}
	var surplus []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		if idx := podIndex(redis.GetName(), pod.Name); idx >= 0 && idx < spec.num {
			byIndex[idx] = pod
		} else {
			surplus = append(surplus, pod)
		}
	}

	// Scale down: owned pods beyond num, or oddly named.
	var deleted []string
	for _, pod := range surplus {
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		deleted = append(deleted, pod.Name)
	}
	if len(deleted) > 0 {
		r.Recorder.Event(redis, corev1.EventTypeNormal, "DeletePod",
			podEvent("Deleted", deleted, fmt.Sprintf("scale down to %d", spec.num)))
	}

	// Create the missing pods, one event per reason naming them.
	recorded, _, _ := unstructured.NestedInt64(redis.Object, "status", "replicas")
	created := map[string][]string{}
	var createErr error
	for idx := 0; idx < spec.num; idx++ {
		if _, ok := byIndex[idx]; ok {
			continue
		}
		pod, err := r.podFor(redis, spec, idx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, pod); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // still terminating, or the cache has not seen it yet
			}
			createErr = err
			break
		}
		why := "scale up"
		if int64(idx) < recorded {
			why = "deleted by hand"
		}
		created[why] = append(created[why], pod.Name)
	}
	for _, why := range []string{"deleted by hand", "scale up"} {
		if names := created[why]; len(names) > 0 {
			r.Recorder.Event(redis, corev1.EventTypeNormal, "CreatePod", podEvent("Created", names, why))
			log.V(1).Info("created pods", "pods", names)
		}
	}
	if createErr != nil {
		return ctrl.Result{}, createErr
	}
	if err := r.ensureChildren(ctx, redis, spec); err != nil {
		return ctrl.Result{}, err
	}

	// Status, only when it changed. A pod just created is not Ready yet.
	ready := 0
	for _, pod := range byIndex {
		if podReady(pod) {
			ready++
		}
	}
	return ctrl.Result{}, r.writeStatus(ctx, redis, int64(spec.num), int64(ready))
}

func (r *RedisReconciler) writeStatus(ctx context.Context, redis *unstructured.Unstructured, replicas, ready int64) error {
	haveReplicas, okR, _ := unstructured.NestedInt64(redis.Object, "status", "replicas")
	haveReady, okReady, _ := unstructured.NestedInt64(redis.Object, "status", "readyReplicas")
	if okR && okReady && haveReplicas == replicas && haveReady == ready {
		return nil
	}
	base := redis.DeepCopy()
	if err := unstructured.SetNestedField(redis.Object, replicas, "status", "replicas"); err != nil {
		return err
	}
	if err := unstructured.SetNestedField(redis.Object, ready, "status", "readyReplicas"); err != nil {
		return err
	}
	return client.IgnoreNotFound(r.Status().Patch(ctx, redis, client.MergeFrom(base)))
}

// finalize deletes the Redis's pods, then releases the finalizer once none is
// left; each pod's deletion brings another reconcile through Owns.
func (r *RedisReconciler) finalize(ctx context.Context, redis *unstructured.Unstructured, pods []corev1.Pod) error {
	if !controllerutil.ContainsFinalizer(redis, finalizer) {
		return nil
	}
	var deleted []string
	for i := range pods {
		pod := &pods[i]
		if !pod.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		deleted = append(deleted, pod.Name)
	}
	if len(deleted) > 0 {
		r.Recorder.Event(redis, corev1.EventTypeNormal, "DeletePod", podEvent("Deleted", deleted, "Redis deleted"))
	}
	if len(pods) > 0 {
		return nil
	}
	controllerutil.RemoveFinalizer(redis, finalizer)
	return client.IgnoreNotFound(r.Update(ctx, redis))
}
