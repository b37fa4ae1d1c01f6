package structs

import "reflect"

var mapStringInterfaceType = reflect.TypeOf(map[string]interface{}(nil))
